"""One real server for the Triton-compatibility tests: model control explicit, every model
of models.py loaded but ``broken``, relaxed readiness (a test loads ``broken`` on purpose)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.testing import RunningServer, run_server
from tests.server.compat.models import LOADED, build_repository
from tests.server.compat.triton_util import client_module


@pytest.fixture(scope="session")
def compat_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("compat-models"))


@pytest.fixture(scope="session")
def compat_server(compat_repository: Path) -> Iterator[RunningServer]:
    args = ["--model-control", "explicit", "--no-strict-readiness"]
    for name in LOADED:
        args += ["--load-model", name]
    with run_server(compat_repository, extra_args=args) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(scope="session", params=["http", "grpc"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def client(compat_server: RunningServer, protocol: str) -> Iterator[Any]:
    """A tritonclient client of ``protocol`` (torn down here: its __del__ fails on any
    thread but this one under gevent, so collect on this thread)."""
    module = client_module(protocol)
    port = compat_server.http_port if protocol == "http" else compat_server.grpc_port
    triton = module.InferenceServerClient(f"127.0.0.1:{port}")
    yield triton
    triton.close()
    del triton
    gc.collect()
