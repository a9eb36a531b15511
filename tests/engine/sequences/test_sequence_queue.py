"""The sequence queue alone, on an injected clock: slots, order, backlog and idle release."""

from __future__ import annotations

import pytest

from conveyor.backends.base import SequenceInfo
from conveyor.engine.request import Request
from conveyor.engine.sequences import SequenceQueue
from conveyor.errors import InvalidInput, QueueFull
from conveyor.futures import InferFuture
from conveyor.repository.sequences import SequenceBatching


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def queue(clock: Clock, *, slots: int = 1, waiting: int = 1) -> SequenceQueue:
    batching = SequenceBatching(max_sequence_idle_us=1_000_000, max_queued_sequences=waiting)
    return SequenceQueue("m", batching, lanes=1, slots=slots, capacity=100, clock=clock)


def request(sequence_id: int | str, tag: str, *, start: bool = False, end: bool = False) -> Request:
    future = InferFuture()
    future.request_id = tag
    return Request(
        inputs={},
        outputs=(),
        priority=0,
        deadline=None,
        future=future,
        enqueued=0.0,
        sequence=SequenceInfo(sequence_id, start, end),
    )


def tags(batch: list[Request] | None) -> list[str | None]:
    assert batch is not None
    return [r.future.request_id for r in batch]


def test_an_execution_takes_one_request_per_slot_in_order() -> None:
    q = queue(Clock(), slots=2)
    for r in (
        request(1, "a1", start=True),
        request(1, "a2"),
        request(2, "b1", start=True),
        request(1, "a3", end=True),
    ):
        q.put(r)
    assert tags(q.take()) == ["a1", "b1"]
    assert tags(q.take()) == ["a2"]
    assert tags(q.take()) == ["a3"]
    assert len(q) == 0


def test_sequences_past_the_slots_wait_then_are_refused() -> None:
    q = queue(Clock())
    q.put(request(1, "a1", start=True))
    q.put(request(2, "b1", start=True))  # waits for the slot
    with pytest.raises(QueueFull, match="max_queued_sequences"):
        q.put(request(3, "c1", start=True))
    assert tags(q.take()) == ["a1"]
    q.put(request(1, "a2", end=True))
    assert tags(q.take()) == ["a2"]
    # The ended sequence gave its slot to the waiting one.
    assert tags(q.take()) == ["b1"]


def test_an_idle_sequence_is_released_and_told_so() -> None:
    """Idle counts from a sequence's last finished request: one still running (its lane
    has not asked for more work) is never idle."""
    clock = Clock()
    q = queue(clock, slots=2)
    q.put(request("s", "s1", start=True))
    q.put(request("t", "t1", start=True))
    assert tags(q.take()) == ["s1", "t1"]
    clock.now = 0.5
    q.put(request("s", "s2"))
    assert tags(q.take()) == ["s2"]  # s1 and t1 finished at 0.5
    clock.now = 2.0
    with pytest.raises(InvalidInput, match="idle"):
        q.put(request("t", "t2"))
    with pytest.raises(InvalidInput, match="START flag"):
        q.put(request("never", "x"))
    q.put(request("s", "s3", end=True))  # s2 is still running: s is not idle
    # The released id may start again, and takes the freed slot.
    q.put(request("t", "u1", start=True, end=True))
    assert tags(q.take()) == ["s3", "u1"]


def test_a_start_for_a_running_sequence_is_refused_until_it_ends() -> None:
    q = queue(Clock())
    q.put(request(7, "a1", start=True))
    with pytest.raises(InvalidInput, match="already running"):
        q.put(request(7, "again", start=True))
    q.put(request(7, "a2", end=True))
    q.put(request(7, "b1", start=True))  # after the end: a new sequence, same id
    assert tags(q.take()) == ["a1"]
    assert tags(q.take()) == ["a2"]
    assert tags(q.take()) == ["b1"]


def test_a_cancelled_request_is_skipped_and_its_sequence_goes_on() -> None:
    q = queue(Clock())
    first = request(1, "a1", start=True)
    q.put(first)
    q.put(request(1, "a2", end=True))
    assert first.future.cancel()
    assert tags(q.take()) == ["a2"]
