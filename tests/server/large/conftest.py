"""One real server for the large-tensor tests, over a repository built here.

- ``identity``: ONNX Identity over FP32 [-1] (tensors of any size, returned as sent)
- ``strings``: ONNX Identity over tensor(string) [-1] (onnxruntime wants UTF-8)
- ``echo_bytes``: Python, BYTES [-1] returned as sent (Python models take any bytes)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from onnx import TensorProto

from conveyor.examples import onnx_models
from conveyor.testing import RunningServer, run_server

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


@pytest.fixture(scope="module")
def large_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    repository = build_repository(tmp_path_factory.mktemp("large-models"))
    extra = ["--max-body-bytes", str(32 * MiB), "--grpc-max-message-bytes", str(32 * MiB)]
    with run_server(repository, extra_args=extra) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"
