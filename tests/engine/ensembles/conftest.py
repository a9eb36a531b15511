"""One real server over the ensembles of models.py, and tritonclient clients for it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.testing import RunningServer, run_server
from tests.engine.ensembles.models import build_repository


@pytest.fixture(scope="session")
def ensemble_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("ensembles"))


@pytest.fixture(scope="session")
def ensemble_server(ensemble_repository: Path) -> Iterator[RunningServer]:
    with run_server(ensemble_repository) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(scope="session")
def ensemble_http_client(ensemble_server: RunningServer) -> Iterator[Any]:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(ensemble_server.http_url.removeprefix("http://"))
    yield client
    client.close()
    del client
    gc.collect()  # its __del__ must run on this thread (see tests/server/conftest.py)


@pytest.fixture(scope="session")
def ensemble_grpc_client(ensemble_server: RunningServer) -> Iterator[Any]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(ensemble_server.grpc_url.removeprefix("grpc://"))
    yield client
    client.close()
