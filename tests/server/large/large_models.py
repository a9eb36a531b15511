"""The repository of the large-tensor tests (what each model does: see conftest.py)."""

from __future__ import annotations

from pathlib import Path

from onnx import TensorProto

from conveyor.examples import onnx_models

MiB = 1 << 20


ECHO_MODEL = """
class Model:
    def infer(self, inputs):
        return {"OUTPUT0": inputs["INPUT0"]}
"""


ECHO_CONFIG = """
backend = "python"
[[inputs]]
name = "INPUT0"
datatype = "BYTES"
shape = [-1]
[[outputs]]
name = "OUTPUT0"
datatype = "BYTES"
shape = [-1]
"""


def build_repository(root: Path) -> Path:
    for name, datatype in (("identity", TensorProto.FLOAT), ("strings", TensorProto.STRING)):
        (root / name / "1").mkdir(parents=True)
        onnx_models.identity(root / name / "1" / "model.onnx", datatype)
    (root / "echo_bytes" / "1").mkdir(parents=True)
    (root / "echo_bytes" / "1" / "model.py").write_text(ECHO_MODEL)
    (root / "echo_bytes" / "config.toml").write_text(ECHO_CONFIG)
    return root
