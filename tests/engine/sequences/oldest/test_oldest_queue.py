"""The oldest strategy in the sequence queue alone, on an injected clock."""

from __future__ import annotations

import threading

import pytest

from conveyor.backends.base import SequenceInfo
from conveyor.engine.request import Request
from conveyor.engine.sequences import SequenceQueue
from conveyor.errors import QueueFull
from conveyor.futures import InferFuture
from conveyor.repository.sequences import OldestStrategy, SequenceBatching


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def oldest_queue(
    clock: Clock,
    *,
    candidates: int = 4,
    max_batch: int = 2,
    preferred: tuple[int, ...] = (),
    delay_us: int = 0,
) -> SequenceQueue:
    batching = SequenceBatching(
        oldest=OldestStrategy(candidates, preferred, delay_us), max_queued_sequences=4
    )
    return SequenceQueue(
        "m",
        batching,
        lanes=1,
        slots=batching.slots_per_instance(max_batch),
        capacity=100,
        max_batch=max_batch,
        clock=clock,
    )


def request(
    sequence_id: int, tag: str, at: float, *, start: bool = False, end: bool = False
) -> Request:
    future = InferFuture()
    future.request_id = tag
    return Request(
        inputs={},
        outputs=(),
        priority=0,
        deadline=None,
        future=future,
        enqueued=at,
        sequence=SequenceInfo(sequence_id, start, end),
    )


def tags(batch: list[Request] | None) -> list[str | None]:
    assert batch is not None
    return [r.future.request_id for r in batch]


def test_more_candidates_than_rows_and_the_oldest_requests_run_first() -> None:
    q = oldest_queue(Clock(), candidates=4, max_batch=2)
    # Four sequences hold the four candidate slots (direct would have two).
    q.put(request(1, "a1", 0.4, start=True))
    q.put(request(2, "b1", 0.1, start=True))
    q.put(request(3, "c1", 0.3, start=True))
    q.put(request(4, "d1", 0.2, start=True))
    assert tags(q.take()) == ["b1", "d1"]  # the two oldest, not the first two slots
    assert tags(q.take()) == ["c1", "a1"]
    assert len(q) == 0


def test_one_request_per_sequence_per_execution_in_order() -> None:
    q = oldest_queue(Clock(), candidates=4, max_batch=4)
    for r in (
        request(1, "a1", 0.0, start=True),
        request(1, "a2", 0.1),
        request(2, "b1", 0.2, start=True),
        request(1, "a3", 0.3, end=True),
    ):
        q.put(r)
    assert tags(q.take()) == ["a1", "b1"]
    assert tags(q.take()) == ["a2"]
    assert tags(q.take()) == ["a3"]


def test_a_batch_is_trimmed_to_a_preferred_size() -> None:
    q = oldest_queue(Clock(), candidates=4, max_batch=4, preferred=(2, 4))
    for n in range(3):
        q.put(request(n, f"s{n}", n / 10, start=True))
    assert tags(q.take()) == ["s0", "s1"]  # three ready: the preferred two run
    assert tags(q.take()) == ["s2"]


def test_waits_up_to_the_queue_delay_for_a_fuller_batch() -> None:
    clock = Clock()
    q = oldest_queue(clock, candidates=4, max_batch=2, delay_us=60_000_000)
    q.put(request(1, "a1", 0.0, start=True))
    taken: list[list[Request] | None] = []
    taker = threading.Thread(target=lambda: taken.append(q.take()))
    taker.start()
    taker.join(0.2)
    assert taker.is_alive(), "ran a batch of one before the queue delay passed"
    q.put(request(2, "b1", 0.0, start=True))  # the batch is full: it runs at once
    taker.join(10)
    assert tags(taken[0]) == ["a1", "b1"]


def test_a_batch_short_of_its_size_runs_once_the_delay_has_passed() -> None:
    clock = Clock()
    q = oldest_queue(clock, candidates=4, max_batch=2, delay_us=1000)
    q.put(request(1, "a1", 0.0, start=True))
    clock.now = 0.002
    assert tags(q.take()) == ["a1"]


def test_candidate_slots_default_to_max_batch_size() -> None:
    assert SequenceBatching(oldest=OldestStrategy()).slots_per_instance(8) == 8
    assert SequenceBatching(oldest=OldestStrategy(16)).slots_per_instance(8) == 16
    assert SequenceBatching().slots_per_instance(0) == 1


def test_sequences_past_the_candidates_wait_then_are_refused() -> None:
    """The candidate slots are the limit on running sequences; past them new sequences wait
    in the backlog (max_queued_sequences, 4 here), then are refused."""
    q = oldest_queue(Clock(), candidates=2, max_batch=1)
    for n in range(6):
        q.put(request(n, f"s{n}", n / 10, start=True))
    with pytest.raises(QueueFull, match="all 2 sequence slots"):
        q.put(request(6, "s6", 0.6, start=True))
    assert tags(q.take()) == ["s0"]
    assert tags(q.take()) == ["s1"]
    q.put(request(0, "s0-end", 0.7, end=True))
    assert tags(q.take()) == ["s0-end"]
    # The ended sequence gave its slot to the oldest waiting one.
    assert tags(q.take()) == ["s2"]
