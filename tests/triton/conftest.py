"""One real server over the Triton-style models of models.py (model control explicit, so
a test can unload one and see finalize run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.testing import RunningServer, run_server
from tests.triton.models import MODELS, PBTXT_MODELS, build_repository


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("triton-models"))


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    loads = [arg for name in [*MODELS, *PBTXT_MODELS] for arg in ("--load-model", name)]
    with run_server(repository, extra_args=["--model-control", "explicit", *loads]) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"
