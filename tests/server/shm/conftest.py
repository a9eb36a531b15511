"""One server for the shared-memory tests (see shm_util.py), and tritonclient clients."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from tests.server.shm.shm_util import shm_repository


@pytest.fixture(scope="session")
def shm_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shm_repository(tmp_path_factory.mktemp("shm-models"))


@pytest.fixture(scope="session")
def shm_server(shm_repo: Path) -> Iterator[RunningServer]:
    """On 127.0.0.1, so shared memory is on by default (auto)."""
    with run_server(shm_repo) as running:
        yield running
        assert running.process.poll() is None, running.output()


@pytest.fixture(scope="session")
def http(shm_server: RunningServer) -> Iterator[Any]:
    client = httpclient.InferenceServerClient(shm_server.http_url.removeprefix("http://"))
    yield client
    client.close()
    del client
    gc.collect()


@pytest.fixture(scope="session")
def grpc_client(shm_server: RunningServer) -> Iterator[Any]:
    client = grpcclient.InferenceServerClient(shm_server.grpc_url.removeprefix("grpc://"))
    yield client
    client.close()
