"""ONNX models built with ``onnx.helper``: the built-in examples, tests and benchmarks use them.

Nothing is downloaded; every model is made here, deterministically, in milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
_IR_VERSION = 8  # old enough for every onnxruntime we support


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = _IR_VERSION
    return save_checked(model, path)


def save_checked(model: onnx.ModelProto, path: Path) -> Path:
    """Check ``model`` and write it to ``path`` at once (a concurrent reader never sees
    half a file)."""
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{id(model)}")
    onnx.save(model, str(tmp))
    tmp.replace(path)
    return path


def tiny(path: Path, width: int = 16) -> Path:
    """OUTPUT0 = INPUT0 + 1 over FP32 [-1, width]: one Add, the overhead probe."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "one"], ["OUTPUT0"])],
        "tiny",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", width])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", width])],
        initializer=[numpy_helper.from_array(np.ones((1,), np.float32), "one")],
    )
    return _save(graph, path)


def mlp(path: Path, features: int = 256, hidden: int = 2048, classes: int = 16) -> Path:
    """Dense -> ReLU -> Dense over FP32 [batch, features]; about 2 MB of weights."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((features, hidden)) / np.sqrt(features)).astype(np.float32)
    b1 = np.zeros(hidden, np.float32)
    w2 = (rng.standard_normal((hidden, classes)) / np.sqrt(hidden)).astype(np.float32)
    b2 = np.zeros(classes, np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["INPUT0", "w1"], ["h"]),
            helper.make_node("Add", ["h", "b1"], ["hb"]),
            helper.make_node("Relu", ["hb"], ["a"]),
            helper.make_node("MatMul", ["a", "w2"], ["o"]),
            helper.make_node("Add", ["o", "b2"], ["OUTPUT0"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", features])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", classes])],
        initializer=[
            numpy_helper.from_array(w1, "w1"),
            numpy_helper.from_array(b1, "b1"),
            numpy_helper.from_array(w2, "w2"),
            numpy_helper.from_array(b2, "b2"),
        ],
    )
    return _save(graph, path)


def identity(path: Path, datatype: int = TensorProto.FLOAT) -> Path:
    """OUTPUT0 = INPUT0 over a 1-D tensor of any length (moves bytes, computes nothing)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])],
        "identity",
        [helper.make_tensor_value_info("INPUT0", datatype, ["N"])],
        [helper.make_tensor_value_info("OUTPUT0", datatype, ["N"])],
    )
    return _save(graph, path)


def matmul(path: Path, size: int, batch_dim: str = "N") -> Path:
    """OUTPUT0 = INPUT0 @ W with W of [size, size] FP32 (size 5120: 100 MiB of weights)."""
    rng = np.random.default_rng(1)
    weights = rng.standard_normal((size, size), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["INPUT0", "W"], ["OUTPUT0"])],
        "matmul",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [batch_dim, size])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [batch_dim, size])],
        initializer=[numpy_helper.from_array(weights, "W")],
    )
    return _save(graph, path)
