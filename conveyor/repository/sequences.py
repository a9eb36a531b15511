"""A stateful model's ``sequence_batching``: the typed form and its ``config.toml`` reading.

config.toml::

    [sequence_batching]
    max_sequence_idle_us = 5000000   # a sequence idle this long loses its slot
    max_queued_sequences = 16        # sequences waiting for a slot; past it, refused
    [sequence_batching.controls]     # tensors the server fills in for the model
    start = "START"                  # INT32 1 on a sequence's first request, else 0
    end = "END"
    ready = "READY"
    corrid = { name = "CORRID", datatype = "BYTES" }   # the sequence id (default UINT64)
    [sequence_batching.oldest]       # the oldest strategy (absent: direct)
    max_candidate_sequences = 16     # sequence slots per instance (default max_batch_size)
    preferred_batch_sizes = [4]      # like dynamic_batching's, over the candidates' requests
    max_queue_delay_us = 100         # wait this long (from the oldest request) for more
    [[sequence_batching.states]]     # implicit state, kept by the server per sequence
    input = "STATE_IN"               # given to the model: zeros on a sequence's start, then
    output = "STATE_OUT"             # what the model gave as this output the request before
    datatype = "FP32"
    shape = [4]

config.pbtxt's ``sequence_batching`` (``control_input``, ``max_sequence_idle_microseconds``)
becomes the same :class:`SequenceBatching` (see ``pbtxt.py``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.errors import RepositoryError
from conveyor.protocol.datatypes import is_datatype
from conveyor.repository.tables import unknown_key

DEFAULT_IDLE_US = 1_000_000  # Triton's default max_sequence_idle_microseconds


class ControlKind(enum.StrEnum):
    """Which control tensor: Triton's CONTROL_SEQUENCE_<kind>."""

    START = "start"
    END = "end"
    READY = "ready"
    CORRID = "corrid"


# Datatypes a control tensor may take, by kind (as Triton allows them).
FLAG_DATATYPES = ("INT32", "FP32", "BOOL")
CORRID_DATATYPES = ("UINT64", "INT64", "UINT32", "INT32", "BYTES")


@dataclasses.dataclass(frozen=True)
class SequenceControl:
    """One control input: the tensor ``name`` (``datatype``) the server fills for the model.

    For a flag (start, end, ready) the tensor holds ``true_value`` or ``false_value``; for
    corrid it holds the sequence id."""

    kind: ControlKind
    name: str
    datatype: str
    false_value: float = 0
    true_value: float = 1


@dataclasses.dataclass(frozen=True)
class SequenceState:
    """Implicit state: the model's ``output`` of one request is its ``input`` on the next
    request of the same sequence (zeros of ``shape`` on a sequence's first request)."""

    input: str
    output: str
    datatype: str
    shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class OldestStrategy:
    """Triton's ``oldest`` strategy: each instance holds ``max_candidate_sequences``
    sequences, and an execution takes the oldest waiting request of up to
    ``max_batch_size`` of them, batched as ``dynamic_batching`` would (preferred sizes, a
    bounded wait for a fuller batch). ``max_candidate_sequences`` 0: ``max_batch_size``."""

    max_candidate_sequences: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0


@dataclasses.dataclass(frozen=True)
class SequenceBatching:
    max_sequence_idle_us: int = DEFAULT_IDLE_US
    # Sequences waiting for a free slot (every slot held by a running sequence); past it a
    # new sequence is refused (UNAVAILABLE) rather than queued without bound.
    max_queued_sequences: int = 64
    controls: tuple[SequenceControl, ...] = ()
    states: tuple[SequenceState, ...] = ()
    oldest: OldestStrategy | None = None  # None: the direct strategy
    # config.pbtxt's iterative_sequence: each request is a sequence of its own, which the
    # model runs again as long as it asks to (a Triton model's request rescheduling). The
    # engine keeps no sequence slots for it: a request needs no sequence id.
    iterative: bool = False

    def slots_per_instance(self, max_batch_size: int) -> int:
        """Sequence slots on each instance: max_candidate_sequences for oldest (when set),
        else max_batch_size (one for a model that does not batch), as Triton has it."""
        if self.oldest is not None and self.oldest.max_candidate_sequences > 0:
            return self.oldest.max_candidate_sequences
        return max(1, max_batch_size)

    def control(self, kind: ControlKind) -> SequenceControl | None:
        return next((c for c in self.controls if c.kind is kind), None)

    @property
    def string_ids(self) -> bool | None:
        """True: ids must be strings; False: integers; None: either (no corrid control)."""
        corrid = self.control(ControlKind.CORRID)
        return None if corrid is None else corrid.datatype == "BYTES"


_KEYS = {"max_sequence_idle_us", "max_queued_sequences", "controls", "states", "oldest"}
_OLDEST_KEYS = {"max_candidate_sequences", "preferred_batch_sizes", "max_queue_delay_us"}
_STATE_KEYS = {"input", "output", "datatype", "shape"}


def parse_sequence_batching(
    raw: Any, fail: Callable[[str], RepositoryError], max_batch_size: int
) -> SequenceBatching:
    """``[sequence_batching]`` of config.toml; ``fail(message)`` makes the error to raise."""
    if not isinstance(raw, Mapping):
        raise fail("sequence_batching must be a table ([sequence_batching])")
    if problem := unknown_key(raw, _KEYS, "[sequence_batching]"):
        raise fail(problem)
    idle = raw.get("max_sequence_idle_us", DEFAULT_IDLE_US)
    queued = raw.get("max_queued_sequences", 64)
    for key, value, minimum in (
        ("max_sequence_idle_us", idle, 1),
        ("max_queued_sequences", queued, 0),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise fail(f"sequence_batching.{key} must be an integer >= {minimum}, got {value!r}")
    controls_raw = raw.get("controls", {})
    if not isinstance(controls_raw, Mapping):
        raise fail("sequence_batching.controls must be a table of kind = tensor name")
    controls = []
    for key, value in controls_raw.items():
        where = f"sequence_batching.controls.{key}"
        try:
            kind = ControlKind(key)
        except ValueError:
            raise fail(f"unknown control {key!r}; expected {', '.join(ControlKind)}") from None
        allowed = CORRID_DATATYPES if kind is ControlKind.CORRID else FLAG_DATATYPES
        name, datatype = value, allowed[0]
        if isinstance(value, Mapping):
            name, datatype = value.get("name"), value.get("datatype", allowed[0])
        if not isinstance(name, str) or not name:
            raise fail(f"{where} must be a tensor name or {{ name = ..., datatype = ... }}")
        if datatype not in allowed:
            raise fail(f"{where}: datatype must be one of {', '.join(allowed)}, got {datatype!r}")
        controls.append(SequenceControl(kind, name, datatype))
    states_raw = raw.get("states", [])
    if not isinstance(states_raw, list):
        raise fail("sequence_batching.states must be an array of tables")
    states = []
    for index, entry in enumerate(states_raw):
        where = f"sequence_batching.states[{index}]"
        if not isinstance(entry, Mapping) or set(entry) != _STATE_KEYS:
            raise fail(f"{where} needs exactly the keys {', '.join(sorted(_STATE_KEYS))}")
        states.append(
            state_spec(
                entry["input"], entry["output"], entry["datatype"], entry["shape"], where, fail
            )
        )
    oldest = None
    if "oldest" in raw:
        oldest = _parse_oldest(raw["oldest"], fail)
        problem = preferred_size_problem(oldest, max_batch_size)
        if problem:
            raise fail(f"sequence_batching.oldest.preferred_batch_sizes: {problem}")
    return SequenceBatching(idle, queued, tuple(controls), tuple(states), oldest)


def _parse_oldest(raw: Any, fail: Callable[[str], RepositoryError]) -> OldestStrategy:
    where = "sequence_batching.oldest"
    if not isinstance(raw, Mapping):
        raise fail(f"{where} must be a table ([{where}])")
    if problem := unknown_key(raw, _OLDEST_KEYS, f"[{where}]"):
        raise fail(problem)

    def integer(key: str, value: Any, minimum: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise fail(f"{where}.{key} must be an integer >= {minimum}, got {value!r}")
        return value

    preferred = raw.get("preferred_batch_sizes", [])
    if not isinstance(preferred, list):
        raise fail(f"{where}.preferred_batch_sizes must be a list of integers >= 1")
    return OldestStrategy(
        max_candidate_sequences=integer(
            "max_candidate_sequences", raw.get("max_candidate_sequences", 0), 0
        ),
        preferred_batch_sizes=tuple(
            sorted(integer("preferred_batch_sizes[]", size, 1) for size in preferred)
        ),
        max_queue_delay_us=integer("max_queue_delay_us", raw.get("max_queue_delay_us", 0), 0),
    )


def preferred_size_problem(oldest: OldestStrategy, max_batch_size: int) -> str | None:
    """What is wrong with the preferred batch sizes, if one is past what an execution holds."""
    limit = max(1, max_batch_size)
    if oldest.preferred_batch_sizes and oldest.preferred_batch_sizes[-1] > limit:
        return (
            f"preferred batch size {oldest.preferred_batch_sizes[-1]} exceeds max_batch_size "
            f"{max_batch_size}"
        )
    return None


def state_spec(
    input_name: Any,
    output_name: Any,
    datatype: Any,
    shape: Any,
    where: str,
    fail: Callable[[str], RepositoryError],
) -> SequenceState:
    """One implicit state, checked: names, a numeric datatype and a fixed shape."""
    if not all(isinstance(n, str) and n for n in (input_name, output_name)):
        raise fail(f"{where}: input and output must be tensor names")
    if not is_datatype(datatype) or datatype == "BYTES":
        raise fail(f"{where}: datatype must be a numeric V2 datatype, got {datatype!r}")
    if not isinstance(shape, list | tuple) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape
    ):
        raise fail(f"{where}: shape must be a list of fixed sizes >= 1, got {shape!r}")
    return SequenceState(input_name, output_name, datatype, tuple(shape))
