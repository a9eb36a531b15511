"""One real server over the accumulator sequence models, and tritonclient clients for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.testing import RunningServer, run_server
from tests.engine.sequences.client_util import close_clients
from tests.engine.sequences.models import build_repository


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("sequence-models"))


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    with run_server(repository) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(autouse=True)
def clients_closed() -> Iterator[None]:
    """The tritonclient clients a test made on its own thread are closed when it ends."""
    yield
    close_clients()
