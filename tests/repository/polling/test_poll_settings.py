"""Poll mode's settings: the interval must be > 0, and goes with --model-control poll only."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conveyor.engine import ModelControl
from conveyor.server.settings import DEFAULT_REPOSITORY_POLL_S, Settings


def test_poll_mode_takes_tritons_default_interval() -> None:
    settings = Settings(model_control=ModelControl.POLL)
    assert settings.poll_interval == DEFAULT_REPOSITORY_POLL_S == 15
    assert Settings(model_control="poll", repository_poll_secs=2).poll_interval == 2  # type: ignore[arg-type]


@pytest.mark.parametrize("seconds", [0, -1])
def test_poll_mode_refuses_an_interval_that_never_polls(seconds: float) -> None:
    with pytest.raises(ValueError, match="--repository-poll-secs must be > 0 seconds"):
        Settings(model_control=ModelControl.POLL, repository_poll_secs=seconds)


@pytest.mark.parametrize("mode", [ModelControl.NONE, ModelControl.EXPLICIT])
def test_an_interval_needs_poll_mode(mode: ModelControl) -> None:
    with pytest.raises(ValueError, match="--repository-poll-secs needs --model-control poll"):
        Settings(model_control=mode, repository_poll_secs=5)


def test_the_server_does_not_start_with_a_zero_interval() -> None:
    command = [sys.executable, "-m", "conveyor", "serve", "--model-control", "poll",
               "--repository-poll-secs", "0"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--repository-poll-secs must be > 0 seconds" in done.stderr
