"""One real ``conveyor serve`` process for the client tests, over a repository built here.

- tiny: ONNX Add (+1) over FP32 [-1, 16]; batched: the same with dynamic batching
- echo: one optional input IN_<T> [-1, -1] per datatype T, returned as OUT_<T>
- echo_<T>: INPUT0 [-1, -1] of datatype T -> OUTPUT0 and OUTPUT1
- sleep: 16 instances; sleeps INPUT0 seconds, OUTPUT1 = [start, end] (monotonic)
- slow, narrow: 1 instance (queue 8 and 1), run-logging: a test can prove which requests ran
- broken: raises
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.protocol.datatypes import DATATYPES
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder


def build_repository(root: Path) -> Path:
    builder = RepoBuilder(root)
    builder.tiny("tiny")
    builder.batched("batched")
    builder.every_datatype_echo("echo")
    for datatype in DATATYPES:
        builder.echo_model(f"echo_{datatype}", datatype)
    builder.sleep_model("sleep", instances=16, queue=512)
    builder.run_logging_model("slow", queue=8)
    builder.run_logging_model("narrow", queue=1)
    builder.failing_model("broken")
    return root


@pytest.fixture(scope="package")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("client") / "models")


@pytest.fixture(scope="package")
def server(repository: Path) -> Iterator[RunningServer]:
    with run_server(repository) as running:
        yield running
        assert running.stop() == 0, running.output()
