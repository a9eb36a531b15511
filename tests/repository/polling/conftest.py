"""One server in poll mode (``--repository-poll-secs 1``) over a repository the tests edit.

The repository starts with:

- steady: ONNX OUTPUT0 = INPUT0 + 1 (FP32 [-1, 4]), never touched: it must never fail;
- changing: the same with + 10; the tests rewrite its constant, then break its config;
- doomed: + 1; the tests remove its folder;
- versioned: + 100 in version 1; the tests add version 2 (+ 200);
- slow: a Python model that answers VALUE; given INPUT0 > 0 it touches ``started`` in a
  signals folder outside the repository and holds the request until ``release`` appears
  there, so the tests change VALUE while a request is surely in flight.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.testing import RunningServer, run_server
from tests.repository.polling.models import write_add_model, write_slow_model

POLL_SECS = 1


@pytest.fixture(scope="module")
def signals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("signals")


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory, signals: Path) -> Path:
    root = tmp_path_factory.mktemp("polled")
    write_add_model(root / "steady", 1)
    write_add_model(root / "changing", 10)
    write_add_model(root / "doomed", 1)
    write_add_model(root / "versioned", 100)
    write_slow_model(root / "slow", 1, signals)
    return root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    args = ["--model-control", "poll", "--repository-poll-secs", str(POLL_SECS)]
    with run_server(repository, extra_args=args) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(scope="module")
def http_client(server: RunningServer) -> Iterator[Any]:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    yield client
    client.close()
    del client
    gc.collect()  # its __del__ must run on this thread


@pytest.fixture(scope="module")
def grpc_client(server: RunningServer) -> Iterator[Any]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    yield client
    client.close()
