"""A repository of ensembles and their step models, written in the tests.

``ensemble_pbtxt`` (config.pbtxt) and ``ensemble_toml`` (config.toml) are the same pipeline:

    RAW ─► double (python, x2) ─► tiny (ONNX, +1) ─► minus_three (python, -3) ─► RESULT
    DELAY ─► sleep_a (python) ─► SPAN_A        DELAY ─► sleep_b (python) ─► SPAN_B

so RESULT = 2 * RAW - 2, and SPAN_A / SPAN_B are the [start, end] times (time.monotonic) of
the two sleep steps, which depend on nothing but the input and so must overlap. The
ensembles' names sort before their step models', so the repository lists an ensemble before
the models it needs. ``failing_pipeline``'s step 1 (``broken_step``) always raises.
``relay`` passes INPUT0 through two echo models (zero-copy); ``sleep_chain`` runs sleep_b
after sleep_a (a step queued only once an earlier one finished). ``labelled_ensemble``
(config.pbtxt, as Triton's preprocess_inception_ensemble) runs ``double_rows`` then
``scorer``, whose output has a label file; the ensemble's own output has none.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.models import RepoBuilder

SCALE_MODEL = """
class Model:
    def infer(self, inputs):
        return {{"OUTPUT0": inputs["INPUT0"] {operation}}}
"""

BROKEN_STEP_MODEL = """
class Model:
    def infer(self, inputs):
        raise ValueError("broken_step refuses every tensor")
"""

ROW_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [-1, 16]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [-1, 16]
"""

INTERFACE_TOML = """
[[inputs]]
name = "RAW"
datatype = "FP32"
shape = [-1, 16]

[[inputs]]
name = "DELAY"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "RESULT"
datatype = "FP32"
shape = [-1, 16]

[[outputs]]
name = "SPAN_A"
datatype = "FP64"
shape = [2]

[[outputs]]
name = "SPAN_B"
datatype = "FP64"
shape = [2]
"""

# Steps in an order that is not the run order: the graph decides, not the list.
ENSEMBLE_TOML = (
    'backend = "ensemble"\n'
    + INTERFACE_TOML
    + """
[[steps]]
model = "minus_three"
input_map = { INPUT0 = "plus_one" }
output_map = { OUTPUT0 = "RESULT" }

[[steps]]
model = "double"
version = 1
input_map = { INPUT0 = "RAW" }
output_map = { OUTPUT0 = "doubled" }

[[steps]]
model = "tiny"
input_map = { INPUT0 = "doubled" }
output_map = { OUTPUT0 = "plus_one" }

[[steps]]
model = "sleep_a"
input_map = { INPUT0 = "DELAY" }
output_map = { OUTPUT1 = "SPAN_A" }

[[steps]]
model = "sleep_b"
input_map = { INPUT0 = "DELAY" }
output_map = { OUTPUT1 = "SPAN_B" }
"""
)

ENSEMBLE_PBTXT = """
name: "ensemble_pbtxt"
platform: "ensemble"
max_batch_size: 0
input [
  { name: "RAW", data_type: TYPE_FP32, dims: [ -1, 16 ] },
  { name: "DELAY", data_type: TYPE_FP32, dims: [ 1 ] }
]
output [
  { name: "RESULT", data_type: TYPE_FP32, dims: [ -1, 16 ] },
  { name: "SPAN_A", data_type: TYPE_FP64, dims: [ 2 ] },
  { name: "SPAN_B", data_type: TYPE_FP64, dims: [ 2 ] }
]
ensemble_scheduling {
  step [
    {
      model_name: "double"
      model_version: -1
      input_map { key: "INPUT0" value: "RAW" }
      output_map { key: "OUTPUT0" value: "doubled" }
    },
    {
      model_name: "tiny"
      model_version: -1
      input_map { key: "INPUT0" value: "doubled" }
      output_map { key: "OUTPUT0" value: "plus_one" }
    },
    {
      model_name: "minus_three"
      model_version: -1
      input_map { key: "INPUT0" value: "plus_one" }
      output_map { key: "OUTPUT0" value: "RESULT" }
    },
    {
      model_name: "sleep_a"
      model_version: -1
      input_map { key: "INPUT0" value: "DELAY" }
      output_map { key: "OUTPUT1" value: "SPAN_A" }
    },
    {
      model_name: "sleep_b"
      model_version: -1
      input_map { key: "INPUT0" value: "DELAY" }
      output_map { key: "OUTPUT1" value: "SPAN_B" }
    }
  ]
}
"""

FAILING_PIPELINE = """
backend = "ensemble"

[[inputs]]
name = "RAW"
datatype = "FP32"
shape = [-1, 16]

[[outputs]]
name = "RESULT"
datatype = "FP32"
shape = [-1, 16]

[[steps]]
model = "double"
input_map = { INPUT0 = "RAW" }
output_map = { OUTPUT0 = "doubled" }

[[steps]]
model = "broken_step"
input_map = { INPUT0 = "doubled" }
output_map = { OUTPUT0 = "RESULT" }
"""

RELAY = """
backend = "ensemble"

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [-1, -1]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [-1, -1]

[[steps]]
model = "echo_1"
input_map = { INPUT0 = "INPUT0" }
output_map = { OUTPUT0 = "middle" }

[[steps]]
model = "echo_2"
input_map = { INPUT0 = "middle" }
output_map = { OUTPUT0 = "OUTPUT0" }
"""

SLEEP_CHAIN = """
backend = "ensemble"

[[inputs]]
name = "DELAY"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "SPAN"
datatype = "FP64"
shape = [2]

[[steps]]
model = "sleep_a"
input_map = { INPUT0 = "DELAY" }
output_map = { OUTPUT0 = "delay_again" }

[[steps]]
model = "sleep_b"
input_map = { INPUT0 = "delay_again" }
output_map = { OUTPUT1 = "SPAN" }
"""

# A preprocessing step and a classifier with a label file, behind an ensemble whose output
# declares no labels: Triton answers class_count requests with the classifier's labels.
PASS_MODEL = """
class Model:
    def infer(self, inputs):
        return {{"{output}": inputs["{input}"] {operation}}}
"""

STEP_PBTXT = """
backend: "python"
max_batch_size: 8
input [ {{ name: "{input}", data_type: TYPE_FP32, dims: [ 4 ] }} ]
output [ {{ name: "{output}", data_type: TYPE_FP32, dims: [ 4 ]{extra} }} ]
"""

SCORER_LABELS = "cat\ndog\nbird\nfish\n"

LABELLED_ENSEMBLE = """
platform: "ensemble"
max_batch_size: 8
input [ { name: "IMAGE", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "CLASSES", data_type: TYPE_FP32, dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "double_rows"
      model_version: -1
      input_map { key: "INPUT0" value: "IMAGE" }
      output_map { key: "OUTPUT0" value: "prepared" }
    },
    {
      model_name: "scorer"
      model_version: -1
      input_map { key: "INPUT0" value: "prepared" }
      output_map { key: "SCORES" value: "CLASSES" }
    }
  ]
}
"""

STEP_MODELS = ("double", "tiny", "minus_three", "sleep_a", "sleep_b")


def write_config(folder: Path, filename: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / filename).write_text(textwrap.dedent(text))


def step_models(repo: RepoBuilder) -> None:
    repo.python("double", SCALE_MODEL.format(operation="* 2"), ROW_CONFIG)
    repo.tiny("tiny")
    repo.python("minus_three", SCALE_MODEL.format(operation="- 3"), ROW_CONFIG)
    repo.sleep_model("sleep_a")
    repo.sleep_model("sleep_b")


def build_repository(path: Path) -> Path:
    repo = RepoBuilder(path)
    step_models(repo)
    repo.python("broken_step", BROKEN_STEP_MODEL, ROW_CONFIG)
    repo.echo_model("echo_1")
    repo.echo_model("echo_2")
    write_config(path / "ensemble_toml", "config.toml", ENSEMBLE_TOML)
    write_config(path / "ensemble_pbtxt", "config.pbtxt", ENSEMBLE_PBTXT)
    (path / "ensemble_pbtxt" / "1").mkdir()  # Triton's empty version folder (optional here)
    write_config(path / "failing_pipeline", "config.toml", FAILING_PIPELINE)
    write_config(path / "relay", "config.toml", RELAY)
    write_config(path / "sleep_chain", "config.toml", SLEEP_CHAIN)
    for name, output, operation, extra in (
        ("double_rows", "OUTPUT0", "* 2", ""),
        ("scorer", "SCORES", "+ 0", ', label_filename: "scorer_labels.txt"'),
    ):
        source = PASS_MODEL.format(output=output, input="INPUT0", operation=operation)
        folder = repo.python(name, source, "")
        (folder / "config.toml").unlink()
        pbtxt = STEP_PBTXT.format(input="INPUT0", output=output, extra=extra)
        write_config(folder, "config.pbtxt", pbtxt)
    (path / "scorer" / "scorer_labels.txt").write_text(SCORER_LABELS)
    write_config(path / "labelled_ensemble", "config.pbtxt", LABELLED_ENSEMBLE)
    return path
