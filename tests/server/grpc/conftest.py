"""One real ``conveyor serve`` process for every gRPC test, over a repository built here.

Models (all loaded at start; the server runs with --model-control explicit so the load and
unload RPCs can be tested):

- tiny, spare: ONNX Add over FP32 [-1, 16] (spare is unloaded and reloaded by a test)
- batched: the same with max_batch_size 8 and dynamic batching
- identity: ONNX Identity over FP32 [-1] (message-size tests)
- echo: Python; one optional input IN_<T> [-1, -1] per datatype T, returned as OUT_<T>
- sleep: Python, 16 instances; sleeps INPUT0 seconds, OUTPUT1 = [start, end] (monotonic)
- slow, narrow: Python, 1 instance (queue 8 and 1); sleeps INPUT0 seconds and appends its
  TAG to runs.log, so a test can prove which requests ran and in which order
- broken: Python; raises
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.examples import onnx_models
from conveyor.protocol.datatypes import DATATYPES
from conveyor.testing import RunningServer, run_server
from tests.conftest import RUN_LOGGING_CONFIG as SLOW_CONFIG
from tests.conftest import RUN_LOGGING_MODEL as SLOW_MODEL
from tests.conftest import RepoBuilder
from tests.server.grpc.grpc_helpers import MAX_MESSAGE_BYTES

ECHO_MODEL = """
class Model:
    def infer(self, inputs):
        return {"OUT_" + name[3:]: array for name, array in inputs.items()}
"""

ECHO_CONFIG = 'backend = "python"\ninstances = 1\n' + "".join(
    f'[[inputs]]\nname = "IN_{t}"\ndatatype = "{t}"\nshape = [-1, -1]\noptional = true\n'
    f'[[outputs]]\nname = "OUT_{t}"\ndatatype = "{t}"\nshape = [-1, -1]\n'
    for t in DATATYPES
)


BROKEN_MODEL = """
class Model:
    def infer(self, inputs):
        raise RuntimeError("this model always fails")
"""

BROKEN_CONFIG = """
backend = "python"
[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [-1]
[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [-1]
"""

BATCHED_CONFIG = """
backend = "onnxruntime"
max_batch_size = 8
[dynamic_batching]
max_queue_delay_us = 100
preferred_batch_sizes = [4, 8]
"""

MODELS = ("tiny", "spare", "batched", "identity", "echo", "sleep", "slow", "narrow", "broken")


@pytest.fixture(scope="package")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = RepoBuilder(tmp_path_factory.mktemp("grpc") / "models")
    builder.onnx("tiny", onnx_models.tiny)
    builder.onnx("spare", onnx_models.tiny)
    builder.onnx("batched", onnx_models.tiny, BATCHED_CONFIG)
    builder.onnx("identity", onnx_models.identity)
    builder.python("echo", ECHO_MODEL, ECHO_CONFIG)
    builder.sleep_model("sleep", instances=16, queue=512)
    builder.python("slow", SLOW_MODEL, SLOW_CONFIG.format(queue=8))
    builder.python("narrow", SLOW_MODEL, SLOW_CONFIG.format(queue=1))
    builder.python("broken", BROKEN_MODEL, BROKEN_CONFIG)
    return builder.path


@pytest.fixture(scope="package")
def server(repository: Path) -> Iterator[RunningServer]:
    args = ["--model-control", "explicit"]
    for name in MODELS:
        args += ["--load-model", name]
    args += ["--grpc-max-message-bytes", str(MAX_MESSAGE_BYTES)]
    with run_server(repository, extra_args=args) as running:
        yield running
        assert running.stop() == 0, running.output()


@pytest.fixture(scope="package")
def grpc_address(server: RunningServer) -> str:
    """host:port, as tritonclient.grpc takes it."""
    return server.grpc_url.removeprefix("grpc://")
