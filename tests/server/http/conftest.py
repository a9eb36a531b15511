"""One real server process for the HTTP tests (see models.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.testing import RunningServer, run_server
from tests.server.http.models import build_repository


@pytest.fixture(scope="session")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("http-models"))


@pytest.fixture(scope="session")
def server(repository: Path) -> Iterator[RunningServer]:
    """The shared server (model control off, default limits)."""
    with run_server(repository) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(scope="session")
def host_port(server: RunningServer) -> str:
    """``127.0.0.1:PORT``, the form tritonclient takes."""
    return server.http_url.removeprefix("http://")


@pytest.fixture(scope="session")
def triton(host_port: str):
    """One tritonclient.http client for all tests (concurrency 4 for async_infer).

    Shared and torn down here because its __del__ fails if the garbage collector happens
    to run it on another thread (gevent's hub is per thread); collect on this thread.
    """
    import gc

    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(host_port, concurrency=4)
    yield client
    client.close()
    del client
    gc.collect()
