"""One server for the in-place output tests, and tritonclient clients of both protocols."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.testing import RunningServer, run_server
from tests.server.shm.iobinding.iobinding_models import connect, iobinding_repository


@pytest.fixture(scope="module")
def iobinding_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return iobinding_repository(tmp_path_factory.mktemp("iobinding-models"))


@pytest.fixture(scope="module")
def iobinding_server(iobinding_repo: Path) -> Iterator[RunningServer]:
    """On 127.0.0.1, so shared memory is on by default."""
    with run_server(iobinding_repo) as running:
        yield running
        assert running.process.poll() is None, running.output()


@pytest.fixture(scope="module", params=["http", "grpc"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def client(protocol: str, iobinding_server: RunningServer) -> Iterator[Any]:
    """A tritonclient client of the protocol."""
    made = connect(iobinding_server, protocol)
    yield made
    made.close()
