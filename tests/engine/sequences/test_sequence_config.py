"""sequence_batching read from config.toml and config.pbtxt, and reported back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tritonclient.http as httpclient

from conveyor.errors import RepositoryError
from conveyor.repository.config import parse_config
from conveyor.repository.pbtxt import read_pbtxt
from conveyor.repository.sequences import ControlKind, SequenceControl
from conveyor.testing import RunningServer

TENSORS: dict[str, Any] = {
    "backend": "python",
    "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1]}],
    "outputs": [{"name": "OUTPUT", "datatype": "INT32", "shape": [1]}],
}


def test_config_toml_sequence_batching() -> None:
    raw = {
        **TENSORS,
        "sequence_batching": {
            "max_sequence_idle_us": 250,
            "controls": {"start": "S", "corrid": {"name": "ID", "datatype": "BYTES"}},
        },
    }
    batching = parse_config("m", raw).sequence_batching
    assert batching is not None
    assert batching.max_sequence_idle_us == 250
    assert batching.controls == (
        SequenceControl(ControlKind.START, "S", "INT32"),
        SequenceControl(ControlKind.CORRID, "ID", "BYTES"),
    )
    assert batching.string_ids is True


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ({"idle": 1}, ["unknown key 'idle' in [sequence_batching]"]),
        ({"max_sequence_idle_us": 0}, ["max_sequence_idle_us must be an integer >= 1"]),
        ({"controls": {"begin": "S"}}, ["unknown control 'begin'"]),
        ({"controls": {"corrid": {"name": "C", "datatype": "FP32"}}}, ["corrid", "FP32"]),
        ({"controls": {"end": ""}}, ["controls.end must be a tensor name"]),
    ],
)
def test_config_toml_mistakes_are_named(section: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(RepositoryError) as caught:
        parse_config("m", {**TENSORS, "sequence_batching": section})
    for word in words:
        assert word in caught.value.message


def test_dynamic_and_sequence_batching_together_are_refused() -> None:
    raw = {**TENSORS, "max_batch_size": 2, "dynamic_batching": {}, "sequence_batching": {}}
    with pytest.raises(RepositoryError, match="not both"):
        parse_config("m", raw)


def read(tmp_path: Path, sequence_batching: str) -> Any:
    path = tmp_path / "m" / "config.pbtxt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        'backend: "python"\n'
        'input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        f"sequence_batching {{ {sequence_batching} }}\n"
    )
    return read_pbtxt(path, "m", backend="python", no_backend=lambda: RepositoryError("none"))


def test_config_pbtxt_oldest_is_read_without_a_warning(tmp_path: Path) -> None:
    """oldest is a strategy of its own now (tests/engine/sequences/oldest has its behaviour)."""
    read_config = read(tmp_path, "oldest { max_candidate_sequences: 4 }")
    batching = read_config.config.sequence_batching
    assert batching is not None and batching.oldest is not None
    assert batching.oldest.max_candidate_sequences == 4
    assert not any("oldest" in warning for warning in read_config.warnings)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            'state [ { input_name: "A" output_name: "B" data_type: TYPE_FP32 dims: [ -1 ] } ]',
            ["sequence_batching.state[0]", "fixed sizes"],
        ),
        (
            'control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID '
            "data_type: TYPE_FP32 } ] } ]",
            ["control_input[0].control[0].data_type", "TYPE_FP32"],
        ),
        (
            'control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START } ] } ]',
            ["control_input[0].control[0]", "int32_false_true"],
        ),
    ],
)
def test_config_pbtxt_mistakes_are_named(tmp_path: Path, text: str, words: list[str]) -> None:
    with pytest.raises(RepositoryError) as caught:
        read(tmp_path, text)
    for word in words:
        assert word in caught.value.message


def test_the_model_config_reports_sequence_batching(server: RunningServer) -> None:
    conn = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    batching = conn.get_model_config("accumulate_triton")["sequence_batching"]
    assert batching["max_sequence_idle_microseconds"] == 5_000_000
    controls = {entry["name"]: entry["control"][0] for entry in batching["control_input"]}
    assert controls["START"] == {"kind": "CONTROL_SEQUENCE_START", "int32_false_true": [0, 1]}
    assert controls["END"]["fp32_false_true"] == [0.0, 1.0]
    assert controls["CORRID"] == {"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_UINT64"}
