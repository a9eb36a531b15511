"""One server in poll mode (``--repository-poll-secs 1``) over a repository the tests edit.

The repository starts with:

- steady: ONNX OUTPUT0 = INPUT0 + 1 (FP32 [-1, 4]), never touched: it must never fail;
- changing: the same with + 10; the tests rewrite its constant, then break its config;
- doomed: + 1; the tests remove its folder;
- versioned: + 100 in version 1; the tests add version 2 (+ 200);
- slow: a Python model that answers VALUE; given INPUT0 > 0 it touches ``started`` in a
  signals folder outside the repository and holds the request until ``release`` appears
  there, so the tests change VALUE while a request is surely in flight.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conveyor.testing import RunningServer, run_server

WIDTH = 4
POLL_SECS = 1

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


@pytest.fixture(scope="module")
def signals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("signals")


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory, signals: Path) -> Path:
    root = tmp_path_factory.mktemp("polled")
    write_add_model(root / "steady", 1)
    write_add_model(root / "changing", 10)
    write_add_model(root / "doomed", 1)
    write_add_model(root / "versioned", 100)
    write_slow_model(root / "slow", 1, signals)
    return root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    args = ["--model-control", "poll", "--repository-poll-secs", str(POLL_SECS)]
    with run_server(repository, extra_args=args) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(scope="module")
def http_client(server: RunningServer) -> Iterator[Any]:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    yield client
    client.close()
    del client
    gc.collect()  # its __del__ must run on this thread


@pytest.fixture(scope="module")
def grpc_client(server: RunningServer) -> Iterator[Any]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    yield client
    client.close()
