"""In-process: poll_repository acts on settled changes; a failed reload keeps the old
versions (in poll and explicit mode alike); load/unload are refused in poll mode.

Deterministic: each scan is a call, and a change is acted on by the second scan that sees it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conveyor import Engine
from conveyor.errors import ModelNotFound, ModelUnavailable, Unavailable
from tests.repository.polling.models import WIDTH, write_add_model

ZEROS = {"INPUT0": np.zeros((1, WIDTH), np.float32)}


def answer(engine: Engine, model: str) -> float:
    return float(engine.submit(model, ZEROS).result(timeout=30)["OUTPUT0"][0, 0])


def settle(engine: Engine) -> list[str]:
    """Two scans: the first sees a change, the second (seeing the same) acts on it."""
    assert engine.poll_repository() == []
    return engine.poll_repository()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    write_add_model(tmp_path / "m", 1)
    with Engine.from_repository(tmp_path, model_control="poll") as running:
        yield running


def test_add_change_and_remove(engine: Engine, tmp_path: Path) -> None:
    assert engine.poll_repository() == []
    write_add_model(tmp_path / "added", 5)
    write_add_model(tmp_path / "m", 2)
    assert settle(engine) == ["added", "m"]
    assert (answer(engine, "added"), answer(engine, "m")) == (5.0, 2.0)
    shutil.rmtree(tmp_path / "added")
    assert settle(engine) == ["added"]
    with pytest.raises(ModelNotFound, match="Request for unknown model: 'added' is not found"):
        engine.submit("added", ZEROS)


def test_a_failed_reload_keeps_the_old_versions_and_says_why(
    engine: Engine, tmp_path: Path
) -> None:
    (tmp_path / "m" / "config.toml").write_text("max_batch_size = -3\n")
    assert settle(engine) == ["m"]
    assert answer(engine, "m") == 1.0
    [entry] = engine.repository_index()
    assert entry.state == "READY" and entry.version == "1"
    assert entry.reason.startswith("reload failed, still serving version 1: ")
    assert engine.failed_models() == []  # it serves: strict readiness is not affected
    (tmp_path / "m" / "config.toml").unlink()  # fixed: the next scans reload it
    write_add_model(tmp_path / "m", 3)
    assert settle(engine) == ["m"]
    assert answer(engine, "m") == 3.0
    assert engine.repository_index()[0].reason == ""


def test_load_and_unload_are_refused(engine: Engine) -> None:
    for call in (engine.load_model, engine.unload_model):
        with pytest.raises(Unavailable, match=r"^explicit model load / unload is not allowed"):
            call("m")


def test_explicit_reload_that_fails_keeps_the_old_versions(tmp_path: Path) -> None:
    write_add_model(tmp_path / "m", 1)
    with Engine.from_repository(tmp_path, model_control="explicit", startup_models=["m"]) as e:
        (tmp_path / "m" / "config.toml").write_text("max_batch_size = -3\n")
        with pytest.raises(ModelUnavailable, match="load failed for model 'm'"):
            e.load_model("m")
        assert answer(e, "m") == 1.0
        assert e.repository_index()[0].state == "READY"
