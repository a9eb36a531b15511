"""Fixtures every test directory shares; the models themselves are in tests/models.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.backends.openvino_telemetry import keep_telemetry_off
from tests.models import RepoBuilder

# Tests import openvino themselves too: no usage event leaves this machine, and no process is
# forked to send one.
keep_telemetry_off()


@pytest.fixture
def instance_kind() -> str:
    """The kind of instance ``repo`` gives python models; ``@both_kinds`` overrides it."""
    return "thread"


@pytest.fixture
def repo(tmp_path: Path, instance_kind: str) -> RepoBuilder:
    return RepoBuilder(tmp_path / "models", instance_kind)
