"""One ``conveyor serve`` on Conveyor's own gRPC transport (the default) for these tests.

Models: tiny (ONNX Add, FP32 [-1, 16]), identity (ONNX Identity, FP32 [-1]: big messages),
runs (Python, one instance, queue 16: sleeps INPUT0 s and logs its TAG, so a test can prove
which requests ran). The message limit is 8 MiB, so a 4 MiB tensor passes and 9 MiB does not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.examples import onnx_models
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder
from tests.server.grpc.h2.requests import MAX_MESSAGE_BYTES


@pytest.fixture(scope="package")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("grpc_h2") / "models"
    builder = RepoBuilder(root)
    builder.tiny("tiny")
    builder.onnx("identity", onnx_models.identity)
    builder.run_logging_model("runs", queue=16)
    return root


@pytest.fixture(scope="package")
def server(repository: Path) -> Iterator[RunningServer]:
    args = ["--grpc-max-message-bytes", str(MAX_MESSAGE_BYTES), "--grpc-transport", "conveyor"]
    with run_server(repository, extra_args=args) as running:
        yield running
        assert running.stop() == 0, running.output()
