"""Bounded queues, deadlines, priorities, failing models, draining on close."""

from __future__ import annotations

import time

import numpy as np
import pytest

import conveyor
from conveyor import Engine
from tests.models import both_kinds
from tests.polling import wait_until

pytestmark = both_kinds  # every test here runs on thread and on process instances


def seconds(value: float) -> dict[str, np.ndarray]:
    return {"INPUT0": np.array([value], np.float32)}


def test_a_full_queue_refuses_at_once(repo):
    repo.sleep_model(instances=1, queue=2)
    with Engine.from_repository(repo.path) as engine:
        blocker = engine.submit("sleep", seconds(0.5))
        wait_until(lambda: engine.statistics("sleep")[0].pending == 0, what="blocker running")
        engine.submit("sleep", seconds(0.01))
        engine.submit("sleep", seconds(0.01))
        with pytest.raises(conveyor.QueueFull, match="max_queue_size"):
            engine.submit("sleep", seconds(0.01))
        assert not blocker.done()  # refused at once, not once the queue moved
        assert isinstance(conveyor.QueueFull("x"), conveyor.ConveyorError)


def test_a_request_whose_deadline_passes_in_the_queue_never_runs(repo):
    repo.sleep_model(instances=1)
    with Engine.from_repository(repo.path) as engine:
        blocker = engine.submit("sleep", seconds(0.4))
        wait_until(lambda: engine.statistics("sleep")[0].pending == 0, what="blocker running")
        late = engine.submit("sleep", seconds(0.01), timeout=0.1)
        with pytest.raises(conveyor.DeadlineExceeded, match="not run"):
            late.result(timeout=10)
        blocker.result(timeout=10)
        stats = engine.statistics("sleep")[0]
    assert stats.execution_count == 1
    assert stats.fail.count == 1


def test_higher_priority_first_then_fifo(repo):
    repo.sleep_model(instances=1)
    with Engine.from_repository(repo.path) as engine:
        blocker = engine.submit("sleep", seconds(0.3))
        wait_until(lambda: engine.statistics("sleep")[0].pending == 0, what="blocker running")
        futures = {
            "low-a": engine.submit("sleep", seconds(0.01), priority=0),
            "low-b": engine.submit("sleep", seconds(0.01), priority=0),
            "high": engine.submit("sleep", seconds(0.01), priority=5),
            "low-c": engine.submit("sleep", seconds(0.01), priority=0),
        }
        blocker.result(timeout=10)
        started = {name: f.result(timeout=10)["OUTPUT1"][0] for name, f in futures.items()}
    order = sorted(started, key=started.__getitem__)
    assert order == ["high", "low-a", "low-b", "low-c"]


FAULTY = """
import numpy as np

class Model:
    def infer(self, inputs):
        mode = int(inputs["INPUT0"][0])
        if mode == 1:
            raise ValueError("the model refuses mode 1")
        if mode == 2:
            return {"WRONG": np.zeros(1, np.float32)}
        if mode == 3:
            return {"OUTPUT0": np.zeros(1, np.int64)}
        if mode == 4:
            return {"OUTPUT0": np.zeros(3, np.float32)}
        if mode == 5:
            return {"OUTPUT0": [0.0]}
        if mode == 6:
            return [1, 2]
        return {"OUTPUT0": np.ones(1, np.float32)}
"""

FAULTY_CONFIG = """
backend = "python"
[[inputs]]
name = "INPUT0"
datatype = "INT32"
shape = [1]
[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [1]
"""


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        (1, "ValueError: the model refuses mode 1"),
        (2, "did not return output 'OUTPUT0'"),
        (3, "returned datatype INT64 for output 'OUTPUT0'; expected FP32"),
        (4, r"returned shape \[3\] for output 'OUTPUT0'; expected \[1\]"),
        (5, "returned list for output 'OUTPUT0'; expected numpy.ndarray"),
        (6, "infer\\(\\) returned list"),
    ],
)
def test_a_failing_model_fails_only_that_request(repo, mode, message):
    repo.python("faulty", FAULTY, FAULTY_CONFIG)
    with Engine.from_repository(repo.path) as engine:
        bad = engine.submit("faulty", {"INPUT0": np.array([mode], np.int32)})
        with pytest.raises(conveyor.ModelError, match=message):
            bad.result(timeout=10)
        good = engine.submit("faulty", {"INPUT0": np.array([0], np.int32)}).result(timeout=10)
        assert good["OUTPUT0"].tolist() == [1.0]
        stats = engine.statistics("faulty")[0]
    assert (stats.success.count, stats.fail.count) == (1, 1)


def test_close_drains_queued_and_running_work_then_refuses(repo):
    repo.sleep_model(instances=2)
    engine = Engine.from_repository(repo.path)
    futures = [engine.submit("sleep", seconds(0.05)) for _ in range(10)]
    engine.close()
    assert all(f.done() and f.exception() is None for f in futures)
    with pytest.raises(conveyor.ShuttingDown):
        engine.submit("sleep", seconds(0.01))
    assert not engine.ready


def test_instances_run_concurrently_on_a_gil_releasing_model(repo):
    repo.sleep_model(instances=4)
    with Engine.from_repository(repo.path) as engine:
        started = time.monotonic()
        futures = [engine.submit("sleep", seconds(0.3)) for _ in range(4)]
        spans = [f.result(timeout=10)["OUTPUT1"] for f in futures]
        elapsed = time.monotonic() - started
    # Four 0.3 s requests in well under the sum of their spans, and every pair overlaps.
    assert elapsed < 0.75 * sum(span[1] - span[0] for span in spans)
    latest_start = max(span[0] for span in spans)
    earliest_end = min(span[1] for span in spans)
    assert latest_start < earliest_end


def test_statistics_count_requests_and_time(repo):
    repo.sleep_model(instances=1)
    with Engine.from_repository(repo.path) as engine:
        for _ in range(3):
            engine.submit("sleep", seconds(0.01)).result(timeout=10)
        stats = engine.statistics("sleep", 1)[0]
        assert engine.statistics() == engine.statistics("sleep")
    assert stats.name == "sleep" and stats.version == 1
    assert stats.success.count == 3 and stats.fail.count == 0
    assert stats.inference_count == 3 and stats.execution_count == 3
    assert stats.compute_infer.count == 3
    assert stats.compute_infer.ns >= 3 * 10_000_000
    assert stats.queue.count == 3
    assert stats.success.ns >= stats.compute_infer.ns
    assert stats.last_inference_ms > 0
    assert stats.batch_stats[0].batch_size == 1
    assert stats.batch_stats[0].compute_infer.count == 3
