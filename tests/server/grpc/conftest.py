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
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder
from tests.server.grpc.grpc_helpers import MAX_MESSAGE_BYTES

MODELS = ("tiny", "spare", "batched", "identity", "echo", "sleep", "slow", "narrow", "broken")


def build_repository(root: Path) -> Path:
    builder = RepoBuilder(root)
    builder.tiny("tiny")
    builder.tiny("spare")
    builder.batched("batched")
    builder.onnx("identity", onnx_models.identity)
    builder.every_datatype_echo("echo")
    builder.sleep_model("sleep", instances=16, queue=512)
    builder.run_logging_model("slow", queue=8)
    builder.run_logging_model("narrow", queue=1)
    builder.failing_model("broken")
    return root


@pytest.fixture(scope="package")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("grpc") / "models")


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
