"""The request queue alone, on an injected clock: deadlines and batch forming without sleeping."""

from __future__ import annotations

import numpy as np
import pytest

from conveyor.engine.request import Request
from conveyor.engine.scheduler import BatchPolicy, RequestQueue
from conveyor.errors import DeadlineExceeded, QueueFull, ShuttingDown
from conveyor.futures import InferFuture


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def request(
    clock: FakeClock,
    *,
    size: int = 1,
    priority: int = 0,
    timeout: float | None = None,
    key: tuple = ("x",),
) -> Request:
    return Request(
        inputs={"INPUT0": np.zeros((size, 1), np.float32)},
        outputs=("OUTPUT0",),
        priority=priority,
        deadline=None if timeout is None else clock() + timeout,
        future=InferFuture(),
        enqueued=clock(),
        batch_size=size,
        batch_key=key,
    )


def test_expired_requests_fail_and_are_skipped():
    clock = FakeClock()
    expired: list[Request] = []
    queue = RequestQueue("m", 8, on_expired=expired.append, clock=clock)
    late = request(clock, timeout=1.0)
    on_time = request(clock, timeout=10.0)
    queue.put(late)
    queue.put(on_time)
    clock.now += 5.0
    assert queue.take(None) == [on_time]
    assert expired == [late]
    with pytest.raises(DeadlineExceeded):
        late.future.result(0)


def test_cancelled_requests_are_skipped():
    clock = FakeClock()
    queue = RequestQueue("m", 8, clock=clock)
    first, second = request(clock), request(clock)
    queue.put(first)
    queue.put(second)
    assert first.future.cancel()
    assert queue.take(None) == [second]
    assert not second.future.cancel()  # running now


def test_capacity_and_close():
    clock = FakeClock()
    queue = RequestQueue("m", 2, clock=clock)
    queue.put(request(clock))
    queue.put(request(clock))
    with pytest.raises(QueueFull):
        queue.put(request(clock))
    queue.close()
    with pytest.raises(ShuttingDown):
        queue.put(request(clock))
    assert len(queue.take(None)) == 1
    assert len(queue.take(None)) == 1
    assert queue.take(None) is None  # closed and drained


def test_priority_then_arrival_order():
    clock = FakeClock()
    queue = RequestQueue("m", 8, clock=clock)
    a, b, c = request(clock), request(clock, priority=3), request(clock)
    for r in (a, b, c):
        queue.put(r)
    assert [queue.take(None)[0] for _ in range(3)] == [b, a, c]


def test_batch_dispatches_when_full_without_waiting():
    clock = FakeClock()
    queue = RequestQueue("m", 16, clock=clock)
    requests = [request(clock, size=2) for _ in range(5)]
    for r in requests:
        queue.put(r)
    batch = queue.take(BatchPolicy(max_batch_size=8, max_queue_delay_s=3600.0))
    assert batch == requests[:4]
    assert len(queue) == 1


def test_expired_delay_trims_to_the_largest_preferred_size():
    clock = FakeClock()
    queue = RequestQueue("m", 16, clock=clock)
    requests = [request(clock) for _ in range(7)]
    for r in requests:
        queue.put(r)
    clock.now += 1.0  # the delay has passed: dispatch now
    policy = BatchPolicy(max_batch_size=16, max_queue_delay_s=0.5, preferred_batch_sizes=(2, 4))
    assert queue.take(policy) == requests[:4]
    assert queue.take(policy) == requests[4:6]
    assert queue.take(policy) == requests[6:]


def test_incompatible_requests_wait_for_their_own_batch():
    clock = FakeClock()
    queue = RequestQueue("m", 16, clock=clock)
    a1, b1, a2 = request(clock, key=("a",)), request(clock, key=("b",)), request(clock, key=("a",))
    for r in (a1, b1, a2):
        queue.put(r)
    clock.now += 1.0
    policy = BatchPolicy(max_batch_size=8, max_queue_delay_s=0.1)
    assert queue.take(policy) == [a1, a2]
    assert queue.take(policy) == [b1]
