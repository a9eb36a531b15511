"""Sequence models in-process (Engine.submit with a SequenceInfo), on both instance kinds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conveyor.backends.base import SequenceInfo
from conveyor.engine import Engine
from conveyor.errors import InvalidInput
from tests.engine.sequences.models import NATIVE_CONFIG, NATIVE_MODEL
from tests.models import RepoBuilder

# Reads the sequence from control inputs only: START (INT32) and CORRID (INT32).
CONTROLLED_MODEL = """
import numpy as np

class Model:
    def infer(self, inputs):
        value = inputs["INPUT"] + inputs["START"] * 100 + inputs["CORRID"] * 1000
        return {"OUTPUT": value.astype(np.int32)}
"""
CONTROLS = 'controls = { start = "START", corrid = { name = "CORRID", datatype = "INT32" } }'


def config(instances: int = 2) -> str:
    return NATIVE_CONFIG.format(instances=instances, idle_us=10_000_000, queued=4)


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_control_inputs_reach_the_model_on_either_instance_kind(tmp_path: Path, kind: str) -> None:
    with_controls = config().replace(
        "max_queued_sequences = 4", f"max_queued_sequences = 4\n{CONTROLS}"
    )
    RepoBuilder(tmp_path, kind).python("controlled", CONTROLLED_MODEL, with_controls)
    with Engine.from_repository(tmp_path) as engine:

        def send(value: int, start: bool = False, end: bool = False) -> int:
            inputs = {"INPUT": np.array([value], np.int32)}
            sequence = SequenceInfo(7, start, end)
            return int(
                engine.submit("controlled", inputs, sequence=sequence).result(30)["OUTPUT"][0]
            )

        assert send(1, start=True) == 7101
        assert send(2) == 7002
        assert send(3, end=True) == 7003
        with pytest.raises(InvalidInput, match="correlation ID"):
            engine.submit("controlled", {"INPUT": np.array([1], np.int32)})


def test_infer_with_a_sequence_argument_is_refused_on_process_instances(tmp_path: Path) -> None:
    RepoBuilder(tmp_path, "process").python("acc", NATIVE_MODEL, config())
    with Engine.from_repository(tmp_path) as engine:
        (entry,) = engine.repository_index()
        assert entry.state == "UNAVAILABLE"
        assert "infer(inputs, sequence) runs on thread instances only" in entry.reason


def test_a_sequence_request_must_have_batch_size_one(tmp_path: Path) -> None:
    batched = config(instances=1).replace(
        'backend = "python"', 'backend = "python"\nmax_batch_size = 4'
    )
    RepoBuilder(tmp_path).python("acc", NATIVE_MODEL, batched)
    with Engine.from_repository(tmp_path) as engine:
        inputs = {"INPUT": np.array([[1], [2]], np.int32)}
        with pytest.raises(InvalidInput, match="batch size 1"):
            engine.submit("acc", inputs, sequence=SequenceInfo(1, start=True))


# Implicit state: the server keeps STATE_OUT and gives it back as STATE_IN (zeros at start).
STATEFUL_MODEL = """
class Model:
    def infer(self, inputs):
        total = inputs["STATE_IN"] + inputs["INPUT"]
        return {"OUTPUT": total.copy(), "STATE_OUT": total}
"""
STATES = """
[[sequence_batching.states]]
input = "STATE_IN"
output = "STATE_OUT"
datatype = "INT32"
shape = [1]
"""


def test_implicit_state_is_kept_by_the_server_per_sequence(tmp_path: Path) -> None:
    with_states = config().replace("[[inputs]]", f"{STATES}\n[[inputs]]", 1)
    RepoBuilder(tmp_path).python("stateful", STATEFUL_MODEL, with_states)
    with Engine.from_repository(tmp_path) as engine:

        def send(sequence_id: int | str, value: int, start: bool = False, end: bool = False) -> int:
            inputs = {"INPUT": np.array([value], np.int32)}
            sequence = SequenceInfo(sequence_id, start, end)
            return int(engine.submit("stateful", inputs, sequence=sequence).result(30)["OUTPUT"][0])

        assert send(1, 5, start=True) == 5
        assert send("a", 100, start=True) == 100
        assert send(1, 2) == 7
        assert send("a", 1, end=True) == 101
        assert send(1, 3, end=True) == 10
        assert send(1, 4, start=True, end=True) == 4  # a new sequence starts from zeros
