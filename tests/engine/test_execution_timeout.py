"""execution_timeout_s on thread instances: an overrun fails its requests, takes that
instance out of service until it returns, and makes the model unready once all are out.

(Process instances kill and replace the worker instead: tests/engine/test_processes.py.)
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import conveyor
from conveyor import Engine
from tests.models import SLEEP_CONFIG, SLEEP_MODEL, RepoBuilder
from tests.polling import wait_until

TIMEOUT_S = 0.3
HANG_S = 2.5


def seconds(value: float) -> dict[str, np.ndarray]:
    return {"INPUT0": np.array([value], np.float32)}


@pytest.fixture
def engine(repo: RepoBuilder) -> Engine:
    config = SLEEP_CONFIG.format(instances=2, queue=8)
    repo.python("sleep", SLEEP_MODEL, f"execution_timeout_s = {TIMEOUT_S}\n{config}")
    with Engine.from_repository(repo.path) as engine:
        yield engine


def test_an_overrun_fails_its_request_and_the_free_instance_keeps_serving(engine: Engine):
    started = time.monotonic()
    hung = engine.submit("sleep", seconds(HANG_S))
    with pytest.raises(conveyor.ModelError, match="did not finish within its execution_timeout_s"):
        hung.result(timeout=HANG_S)
    assert time.monotonic() - started < HANG_S - 0.5  # failed at the timeout, not at the end
    # One instance is stuck; the other still serves, and the model is ready.
    assert engine.model("sleep").ready
    quick = [engine.submit("sleep", seconds(0.0625)) for _ in range(4)]
    assert [f.result(timeout=5)["OUTPUT0"].tolist() for f in quick] == [[0.0625]] * 4
    # The hung execution returns later: its request is not answered twice, and it is
    # counted once, as a failure.
    time.sleep(HANG_S)
    assert isinstance(hung.exception(timeout=0), conveyor.ModelError)
    (stats,) = engine.statistics("sleep")
    assert (stats.success.count, stats.fail.count) == (4, 1)


def test_all_instances_stuck_makes_the_model_unready_until_one_returns(engine: Engine):
    hung = [engine.submit("sleep", seconds(HANG_S)) for _ in range(2)]
    queued = engine.submit("sleep", seconds(0.0))  # behind two stuck instances
    for future in hung:
        with pytest.raises(conveyor.ModelError, match=r"execution_timeout_s of 0\.3 s"):
            future.result(timeout=HANG_S)
    # What was queued cannot run: it fails as unavailable instead of waiting forever.
    with pytest.raises(conveyor.ModelNotReady, match="all 2 of its instances are stuck"):
        queued.result(timeout=2)
    assert not engine.model("sleep").ready
    (entry,) = [e for e in engine.repository_index() if e.name == "sleep"]
    assert entry.state == "UNAVAILABLE"
    assert "stuck in executions past its execution_timeout_s" in entry.reason
    with pytest.raises(conveyor.ModelNotReady, match="all 2 of its instances are stuck"):
        engine.submit("sleep", seconds(0.0))

    wait_until(lambda: engine.model("sleep").ready, HANG_S + 5, "sleep ready again")
    assert engine.model("sleep").ready
    assert engine.submit("sleep", seconds(0.0)).result(timeout=5)["OUTPUT0"].tolist() == [0.0]
    assert [e.state for e in engine.repository_index() if e.name == "sleep"] == ["READY"]


def test_without_a_timeout_a_long_execution_just_runs(repo: RepoBuilder):
    repo.sleep_model(instances=1)
    with Engine.from_repository(repo.path) as engine:
        assert engine.submit("sleep", seconds(0.5)).result(timeout=5)["OUTPUT0"].tolist() == [0.5]


def test_closing_does_not_wait_for_a_stuck_instance(repo: RepoBuilder):
    config = SLEEP_CONFIG.format(instances=2, queue=8)
    repo.python("sleep", SLEEP_MODEL, f"execution_timeout_s = {TIMEOUT_S}\n{config}")
    engine = Engine.from_repository(repo.path)
    hung = engine.submit("sleep", seconds(HANG_S))
    running = engine.submit("sleep", seconds(0.125))  # within the timeout: it must finish
    with pytest.raises(conveyor.ModelError):
        hung.result(timeout=HANG_S)
    started = time.monotonic()
    engine.close()
    assert time.monotonic() - started < HANG_S - 1.0  # did not wait for the stuck thread
    assert running.result(timeout=0)["OUTPUT0"].tolist() == [0.125]
