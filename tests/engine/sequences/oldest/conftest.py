"""The oldest-strategy accumulator models in place of the parent folder's repository; the
server over them and the closing of tritonclient clients are tests/engine/sequences'
fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.sequences.oldest.models import build_repository


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("oldest-models"))
