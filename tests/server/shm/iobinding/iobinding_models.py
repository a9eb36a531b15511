"""ONNX models of the in-place output tests, the repository that holds them, and a
tritonclient client of either protocol for their server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper, numpy_helper

from conveyor.examples import onnx_models
from conveyor.testing import RunningServer
from tests.models import RepoBuilder

# Four requests fill the preferred batch at once; a lone request waits up to the delay.
BATCHED_CONFIG = """
backend = "onnxruntime"
max_batch_size = 8
instances = 1
[dynamic_batching]
max_queue_delay_us = 500000
preferred_batch_sizes = [4]
"""

FILL_VALUE = 7.0


def scale(path: Path) -> Path:
    """OUTPUT0 = INPUT0 * 2 over FP32 [batch, n] (n any)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "INPUT0"], ["OUTPUT0"])],
        "scale",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["B", "N"])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["B", "N"])],
    )
    return onnx_models._save(graph, path)


def fill(path: Path) -> Path:
    """OUTPUT0 = FILL_VALUE repeated LENGTH[0] times: the output's shape depends on the
    input's value, so the same input shape can give another output shape."""
    value = numpy_helper.from_array(np.array([FILL_VALUE], np.float32), "value")
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["LENGTH"], ["OUTPUT0"], value=value)],
        "fill",
        [helper.make_tensor_value_info("LENGTH", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N"])],
    )
    return onnx_models._save(graph, path)


def pair(path: Path) -> Path:
    """OUTPUT0 = INPUT0 * 2 and OUTPUT1 = INPUT0 over FP32 [n]: two outputs, either of
    which may be bound on its own."""
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT0", "INPUT0"], ["OUTPUT0"]),
            helper.make_node("Identity", ["INPUT0"], ["OUTPUT1"]),
        ],
        "pair",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N"])],
        [
            helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N"]),
            helper.make_tensor_value_info("OUTPUT1", TensorProto.FLOAT, ["N"]),
        ],
    )
    return onnx_models._save(graph, path)


def string_identity(path: Path) -> Path:
    return onnx_models.identity(path, TensorProto.STRING)


def iobinding_repository(root: Path) -> Path:
    builder = RepoBuilder(root)
    builder.onnx("identity", onnx_models.identity)
    builder.onnx("fill", fill)
    builder.onnx("pair", pair)
    builder.onnx("strings", string_identity)
    builder.onnx("scale", scale, BATCHED_CONFIG)
    return root


def connect(server: RunningServer, protocol: str) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    return grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
