"""The test models of the HTTP tests, written into a repository in milliseconds.

- ``echo_<DATATYPE>`` for every V2 datatype: Python, INPUT0 [-1, -1] -> OUTPUT0 and OUTPUT1
  (both a copy), so every datatype travels both ways and outputs can be picked.
- ``tiny``: ONNX Add (+1) over FP32 [-1, 16]; ``batched``: the same with max_batch_size 8
  and dynamic batching.
- ``sleep`` (2 instances) and ``gate`` (1 instance): Python, sleep INPUT0 seconds; OUTPUT1
  is [start, end] (time.monotonic) so tests can see what ran when.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from conveyor.examples import onnx_models
from conveyor.protocol.datatypes import DATATYPES
from tests.conftest import SLEEP_MODEL

ECHO_MODEL = """
class Model:
    def infer(self, inputs):
        x = inputs["INPUT0"]
        return {"OUTPUT0": x, "OUTPUT1": x.copy()}
"""

ECHO_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "INPUT0"
datatype = "{datatype}"
shape = [-1, -1]

[[outputs]]
name = "OUTPUT0"
datatype = "{datatype}"
shape = [-1, -1]

[[outputs]]
name = "OUTPUT1"
datatype = "{datatype}"
shape = [-1, -1]
"""

SLEEP_CONFIG = """
backend = "python"
instances = {instances}
max_queue_size = 64

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "OUTPUT1"
datatype = "FP64"
shape = [2]
"""

BATCHED_CONFIG = """
backend = "onnxruntime"
max_batch_size = 8

[dynamic_batching]
max_queue_delay_us = 100
"""


def python_model(root: Path, name: str, source: str, config: str) -> None:
    folder = root / name / "1"
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(textwrap.dedent(source))
    (root / name / "config.toml").write_text(textwrap.dedent(config))


def build_repository(root: Path) -> Path:
    for datatype in DATATYPES:
        python_model(root, f"echo_{datatype}", ECHO_MODEL, ECHO_CONFIG.format(datatype=datatype))
    onnx_models.tiny(root / "tiny" / "1" / "model.onnx")
    onnx_models.tiny(root / "batched" / "1" / "model.onnx")
    (root / "batched" / "config.toml").write_text(BATCHED_CONFIG)
    python_model(root, "sleep", SLEEP_MODEL, SLEEP_CONFIG.format(instances=2))
    python_model(root, "gate", SLEEP_MODEL, SLEEP_CONFIG.format(instances=1))
    return root
