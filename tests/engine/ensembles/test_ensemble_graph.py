"""A bad ensemble graph fails to load, and the error names the problem."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conveyor import Engine
from conveyor.errors import RepositoryError
from conveyor.repository.config import parse_config
from tests.engine.ensembles.models import ROW_CONFIG, SCALE_MODEL, write_config
from tests.models import RepoBuilder

INTERFACE = {
    "backend": "ensemble",
    "inputs": [{"name": "RAW", "datatype": "FP32", "shape": [-1, 16]}],
    "outputs": [{"name": "RESULT", "datatype": "FP32", "shape": [-1, 16]}],
}


def step(model: str, reads: str, writes: str) -> dict[str, object]:
    return {"model": model, "input_map": {"INPUT0": reads}, "output_map": {"OUTPUT0": writes}}


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            [step("double", "nowhere", "RESULT")],
            "step 0 (model 'double') input 'INPUT0' reads tensor 'nowhere', which no ensemble "
            "input and no step output provides",
        ),
        (
            [step("double", "RAW", "other")],
            "output 'RESULT' is produced by no step",
        ),
        (
            [step("double", "b", "a"), step("double", "a", "b"), step("double", "a", "RESULT")],
            "steps form a cycle (each waits on another's output): step 0 (model 'double'), "
            "step 1 (model 'double')",
        ),
        (
            [step("double", "RAW", "x"), step("double", "RAW", "x")],
            "step 1 (model 'double') writes tensor 'x', which step 0 (model 'double') already",
        ),
        ([], "an ensemble needs steps"),
        ([{"model": "double", "input_map": {}}], "steps[0].input_map must be a non-empty table"),
    ],
)
def test_a_bad_graph_is_a_config_error(steps: list[object], expected: str) -> None:
    with pytest.raises(RepositoryError) as caught:
        parse_config("pipe", {**INTERFACE, "steps": steps})
    assert expected in caught.value.message
    assert caught.value.message.startswith("model 'pipe': ")


def test_steps_belong_to_ensembles_only() -> None:
    with pytest.raises(RepositoryError, match="steps are for ensembles"):
        parse_config("m", {"backend": "python", "steps": []})


ENSEMBLE_TOML = """
backend = "ensemble"
[[inputs]]
name = "RAW"
datatype = "FP32"
shape = [-1, 16]
[[outputs]]
name = "RESULT"
datatype = "{out_type}"
shape = [-1, 16]
[[steps]]
model = "{model}"
input_map = {{ {model_input} = "RAW" }}
output_map = {{ OUTPUT0 = "RESULT" }}
"""

CYCLE_PBTXT = """
platform: "ensemble"
input [ { name: "RAW", data_type: TYPE_FP32, dims: [ -1, 16 ] } ]
output [ { name: "RESULT", data_type: TYPE_FP32, dims: [ -1, 16 ] } ]
ensemble_scheduling {
  step [
    { model_name: "double", input_map { key: "INPUT0" value: "b" },
      output_map { key: "OUTPUT0" value: "a" } },
    { model_name: "double", input_map { key: "INPUT0" value: "a" },
      output_map { key: "OUTPUT0" value: "b" } },
    { model_name: "double", input_map { key: "INPUT0" value: "a" },
      output_map { key: "OUTPUT0" value: "RESULT" } }
  ]
}
"""


def test_load_errors_name_the_step_and_the_problem(tmp_path: Path) -> None:
    repo = RepoBuilder(tmp_path)
    repo.python("double", SCALE_MODEL.format(operation="* 2"), ROW_CONFIG)
    cases = {
        "missing_model": ("nope", "INPUT0", "FP32"),
        "unknown_input": ("double", "INPUT9", "FP32"),
        "wrong_datatype": ("double", "INPUT0", "INT32"),
    }
    for name, (model, model_input, out_type) in cases.items():
        config = ENSEMBLE_TOML.format(model=model, model_input=model_input, out_type=out_type)
        write_config(tmp_path / name, "config.toml", config)
    write_config(tmp_path / "cycle_pbtxt", "config.pbtxt", textwrap.dedent(CYCLE_PBTXT))
    with Engine.from_repository(tmp_path) as engine:
        reasons = {entry.name: entry.reason for entry in engine.failed_models()}
        assert engine.model("double").ready  # the step model itself serves
    assert set(reasons) == {*cases, "cycle_pbtxt"}
    assert "ensemble step 0 (model 'nope') cannot run" in reasons["missing_model"]
    assert "'nope' is not found" in reasons["missing_model"]
    assert "step 0 (model 'double'): 'double' has no input 'INPUT9'" in reasons["unknown_input"]
    mismatch = "ensemble output 'RESULT' is INT32, but step 0 (model 'double') makes it FP32"
    assert mismatch in reasons["wrong_datatype"]
    assert "steps form a cycle" in reasons["cycle_pbtxt"]
