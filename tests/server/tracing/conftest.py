"""Tracing tests: a repository with ``tiny`` (ONNX +1, no batching) and ``batched`` (the same
with dynamic batching), and a server whose trace settings each test sets itself."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder


@pytest.fixture(scope="package")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tracing-models")
    builder = RepoBuilder(root)
    builder.tiny("tiny")
    builder.batched("batched")
    return root


@pytest.fixture(scope="package")
def server(repository: Path) -> Iterator[RunningServer]:
    """Tracing off at start (the default)."""
    with run_server(repository) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(scope="package")
def clients(server: RunningServer) -> Iterator[dict[str, Any]]:
    """One tritonclient client per protocol, by name."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    made = {
        "http": httpclient.InferenceServerClient(server.http_url.removeprefix("http://")),
        "grpc": grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://")),
    }
    yield made
    for client in made.values():
        client.close()
    made.clear()
    gc.collect()  # tritonclient's __del__ must run on this thread
