"""One real server over the Triton-format repository of models.py, and clients for it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.testing import RunningServer, run_server
from tests.repository.models import build_repository


@pytest.fixture(scope="session")
def triton_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("triton-models"))


@pytest.fixture(scope="session")
def triton_server(triton_repository: Path) -> Iterator[RunningServer]:
    # Some models fail to load on purpose: readiness must not wait for them.
    with run_server(triton_repository, extra_args=["--no-strict-readiness"]) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(scope="session")
def http_client(triton_server: RunningServer):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(triton_server.http_url.removeprefix("http://"))
    yield client
    client.close()
    del client
    gc.collect()  # its __del__ must run on this thread (see tests/server/conftest.py)


@pytest.fixture(scope="session")
def grpc_client(triton_server: RunningServer):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(triton_server.grpc_url.removeprefix("grpc://"))
    yield client
    client.close()
