"""One server over Triton's ``simple`` model for the tests of what Triton's client examples
need (benchmarks/triton_examples.py runs the examples themselves)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from tests.server.shm.shm_util import shm_repository


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """On 127.0.0.1, so system shared memory is on (auto)."""
    with run_server(shm_repository(tmp_path_factory.mktemp("examples"))) as running:
        yield running
        assert running.process.poll() is None, running.output()


@pytest.fixture(params=("http", "grpc"))
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(server: RunningServer, protocol: str) -> Iterator[Any]:
    if protocol == "http":
        made: Any = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    else:
        made = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    yield made
    made.close()
