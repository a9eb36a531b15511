"""config.pbtxt's ``sequence_batching`` read into :class:`SequenceBatching`.

Honoured: ``max_sequence_idle_microseconds``, ``control_input`` (START, END, READY, CORRID
with their false/true values and data types), ``direct``, and ``oldest`` with its
``max_candidate_sequences``, ``preferred_batch_size`` and ``max_queue_delay_microseconds``
(``preserve_ordering`` holds anyway: each request gets its own answer). Implicit ``state``
is kept by the server (zeros to start with). ``iterative_sequence`` makes each request a
sequence of its own that the model may reschedule (``SequenceBatching.iterative``). Refused:
an ``initial_state`` from a file, which would change what the model answers.
"""

from __future__ import annotations

from collections.abc import Callable

from conveyor.errors import RepositoryError
from conveyor.protocol.grpc._generated import model_config_pb2 as pb
from conveyor.repository.sequences import (
    CORRID_DATATYPES,
    DEFAULT_IDLE_US,
    FLAG_DATATYPES,
    ControlKind,
    OldestStrategy,
    SequenceBatching,
    SequenceControl,
    SequenceState,
    preferred_size_problem,
    state_spec,
)

_KINDS = {
    pb.ModelSequenceBatching.Control.CONTROL_SEQUENCE_START: ControlKind.START,
    pb.ModelSequenceBatching.Control.CONTROL_SEQUENCE_END: ControlKind.END,
    pb.ModelSequenceBatching.Control.CONTROL_SEQUENCE_READY: ControlKind.READY,
    pb.ModelSequenceBatching.Control.CONTROL_SEQUENCE_CORRID: ControlKind.CORRID,
}

Fail = Callable[[str, str], RepositoryError]


def read_sequence_batching(
    batching: pb.ModelSequenceBatching, fail: Fail, max_batch_size: int
) -> SequenceBatching:
    where = "sequence_batching"
    if batching.iterative_sequence:
        return _iterative(batching, where, fail)
    oldest = None
    if batching.HasField("oldest"):
        oldest = _oldest(batching.oldest, max_batch_size, f"{where}.oldest", fail)
    controls = []
    for i, control_input in enumerate(batching.control_input):
        for j, control in enumerate(control_input.control):
            at = f"{where}.control_input[{i}].control[{j}]"
            controls.append(_control(control_input.name, control, at, fail))
    kinds = [c.kind for c in controls]
    if len(set(kinds)) != len(kinds):
        raise fail(f"{where}.control_input", "a control kind is given twice")
    states = tuple(
        _state(state, f"{where}.state[{i}]", fail) for i, state in enumerate(batching.state)
    )
    idle = batching.max_sequence_idle_microseconds or DEFAULT_IDLE_US
    return SequenceBatching(
        max_sequence_idle_us=idle, controls=tuple(controls), states=states, oldest=oldest
    )


def _iterative(batching: pb.ModelSequenceBatching, where: str, fail: Fail) -> SequenceBatching:
    """``iterative_sequence``: requests rescheduled by the model (Triton's Python backend),
    each its own sequence. Controls and state, which Conveyor's sequence slots fill in, are
    refused with it rather than silently not filled."""
    for field in ("control_input", "state"):
        if getattr(batching, field):
            raise fail(f"{where}.{field}", "is not supported with iterative_sequence")
    return SequenceBatching(iterative=True)


def _oldest(
    strategy: pb.ModelSequenceBatching.StrategyOldest, max_batch_size: int, where: str, fail: Fail
) -> OldestStrategy:
    for field, values in (
        ("max_candidate_sequences", [strategy.max_candidate_sequences]),
        ("preferred_batch_size", list(strategy.preferred_batch_size)),
    ):
        if any(value < 0 for value in values):
            raise fail(f"{where}.{field}", f"must not be negative, got {min(values)}")
    if any(size == 0 for size in strategy.preferred_batch_size):
        raise fail(f"{where}.preferred_batch_size", "sizes must be >= 1")
    oldest = OldestStrategy(
        max_candidate_sequences=strategy.max_candidate_sequences,
        preferred_batch_sizes=tuple(sorted(strategy.preferred_batch_size)),
        max_queue_delay_us=strategy.max_queue_delay_microseconds,
    )
    problem = preferred_size_problem(oldest, max_batch_size)
    if problem:
        raise fail(f"{where}.preferred_batch_size", problem)
    return oldest


def _state(state: pb.ModelSequenceBatching.State, where: str, fail: Fail) -> SequenceState:
    for i, initial in enumerate(state.initial_state):
        if initial.WhichOneof("state_data") != "zero_data":
            raise fail(
                f"{where}.initial_state[{i}]",
                "only zero_data is supported (a sequence's state starts as zeros)",
            )
    datatype = pb.DataType.Name(state.data_type).removeprefix("TYPE_")
    return state_spec(
        state.input_name,
        state.output_name,
        datatype,
        list(state.dims),
        where,
        lambda message: fail(where, message.removeprefix(f"{where}: ")),
    )


def _control(
    name: str, control: pb.ModelSequenceBatching.Control, where: str, fail: Fail
) -> SequenceControl:
    if not name:
        raise fail(where, "its control_input needs a name")
    kind = _KINDS[control.kind]
    if kind is ControlKind.CORRID:
        datatype = pb.DataType.Name(control.data_type).removeprefix("TYPE_")
        datatype = "BYTES" if datatype == "STRING" else datatype
        if datatype not in CORRID_DATATYPES:
            raise fail(
                f"{where}.data_type",
                f"CONTROL_SEQUENCE_CORRID needs TYPE_UINT64, TYPE_INT64, TYPE_UINT32, "
                f"TYPE_INT32 or TYPE_STRING, got {pb.DataType.Name(control.data_type)}",
            )
        return SequenceControl(kind, name, datatype)
    pairs = (
        ("INT32", list(control.int32_false_true)),
        ("FP32", list(control.fp32_false_true)),
        ("BOOL", list(control.bool_false_true)),
    )
    given = [(datatype, values) for datatype, values in pairs if values]
    if len(given) != 1 or len(given[0][1]) != 2:
        raise fail(
            where,
            "needs exactly one of int32_false_true, fp32_false_true or bool_false_true with "
            "two values (false, true)",
        )
    datatype, (false_value, true_value) = given[0]
    assert datatype in FLAG_DATATYPES
    return SequenceControl(kind, name, datatype, float(false_value), float(true_value))
