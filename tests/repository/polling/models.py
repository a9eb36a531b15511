"""The models of the poll-mode repository, written atomically so a scan never sees half a
file: ONNX ``OUTPUT0 = INPUT0 + constant`` and the Python ``slow`` model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTH = 4


SLOW_MODEL = """
import pathlib
import time
import numpy as np

VALUE = {value}
SIGNALS = pathlib.Path({signals!r})

class Model:
    def infer(self, inputs):
        # INPUT0 > 0: say so (started), then hold the request until the test releases it.
        if float(inputs["INPUT0"].ravel()[0]) > 0:
            (SIGNALS / "started").touch()
            deadline = time.monotonic() + 60
            while not (SIGNALS / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return {{"OUTPUT0": np.full((1,), VALUE, np.float32)}}
"""


SLOW_CONFIG = """
backend = "python"
instances = 2  # a held request must not hold up the others

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [1]
"""


def write_add_model(folder: Path, constant: float, version: int = 1) -> None:
    """OUTPUT0 = INPUT0 + constant, written atomically (a scan never sees half a file)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "c"], ["OUTPUT0"])],
        "add_constant",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", WIDTH])],
        initializer=[numpy_helper.from_array(np.full((1,), constant, np.float32), "c")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / str(version) / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("model.onnx.tmp")
    onnx.save(model, str(tmp))
    tmp.replace(path)


def write_slow_model(folder: Path, value: float, signals: Path) -> None:
    (folder / "1").mkdir(parents=True, exist_ok=True)
    tmp = folder / "1" / "model.py.tmp"
    tmp.write_text(SLOW_MODEL.format(value=value, signals=str(signals)))
    tmp.replace(folder / "1" / "model.py")
    (folder / "config.toml").write_text(SLOW_CONFIG)
