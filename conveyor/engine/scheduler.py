"""A model's bounded priority queue, and how instances take work (or batches) from it.

Higher priority first, FIFO within a priority. A request is marked running (and so can no
longer be cancelled) only at the moment it is handed to an instance; one that was cancelled
or whose deadline passed while queued is dropped then and never runs.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import threading
import time
from collections.abc import Callable

from conveyor.engine.request import Request
from conveyor.errors import DeadlineExceeded, QueueFull, ShuttingDown
from conveyor.protocol import triton_words as triton

Clock = Callable[[], float]
_Entry = tuple[int, int, Request]  # (-priority, arrival sequence, request)


@dataclasses.dataclass(frozen=True)
class BatchPolicy:
    max_batch_size: int
    max_queue_delay_s: float
    preferred_batch_sizes: tuple[int, ...] = ()
    # Bound on a batch's padded size: rows x the widest row of the ``ragged`` inputs (each
    # request's row padded to the batch's largest shape). 0: no bound. A request larger
    # than the bound alone still runs, alone. On one core a transformer runs a batch of long
    # texts slower per text than a few at a time (the activations leave the cache).
    max_padded_elements: int = 0
    ragged: tuple[str, ...] = ()


class RequestQueue:
    def __init__(
        self,
        model: str,
        capacity: int,
        *,
        on_expired: Callable[[Request], None] = lambda request: None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.model = model
        self.capacity = capacity
        self.clock = clock
        self._on_expired = on_expired
        self._heap: list[_Entry] = []
        self._held = 0  # popped by a batch being formed, not yet dispatched
        # Entered directly (C) on the hot paths; the condition waits and notifies over it.
        self._mutex = threading.RLock()
        self._cond = threading.Condition(self._mutex)
        self._forming = threading.Lock()  # one instance at a time forms a dynamic batch
        self._arrivals = itertools.count()
        self._closed = False
        # Takers asleep in a wait on the condition. A taker that is awake looks at the heap
        # (under the condition's lock) before it sleeps, so a put needs to notify only when
        # one sleeps: while the instances are busy draining the queue, puts skip the notify.
        self._waiting = 0

    def __len__(self) -> int:
        return len(self._heap) + self._held

    def put(self, request: Request) -> None:
        with self._mutex:
            if self._closed:
                raise ShuttingDown(
                    f"model {self.model!r} is shutting down; it takes no new requests"
                )
            if len(self._heap) + self._held >= self.capacity:
                raise QueueFull(
                    triton.first(
                        triton.QUEUE_FULL,
                        f"model {self.model!r} has {self.capacity} requests queued "
                        "(max_queue_size); retry later",
                    )
                )
            heapq.heappush(self._heap, (-request.priority, next(self._arrivals), request))
            if self._waiting:
                self._cond.notify()

    def close(self) -> None:
        """Take nothing new; takers drain what is queued, then get None."""
        with self._mutex:
            self._closed = True
            self._cond.notify_all()

    def take_waiting(self) -> list[Request]:
        """Remove every queued request not yet cancelled, mark it running and return it,
        for the caller to fail (when no instance is left to run them)."""
        with self._mutex:
            entries, self._heap = self._heap, []
        return [entry[2] for entry in entries if entry[2].future.set_running_or_notify_cancel()]

    def take(self, policy: BatchPolicy | None) -> list[Request] | None:
        """Block until work is ready; return it marked running, or None once closed and empty."""
        while True:
            if policy is None:
                with self._mutex:
                    entry = self._wait_for_entry()
                    if entry is None:
                        return None
                    if self._start(entry[2]):
                        return [entry[2]]
            else:
                with self._forming, self._mutex:
                    entry = self._wait_for_entry()
                    if entry is None:
                        return None
                    batch = self._form_batch(entry, policy)
                    if batch:
                        return batch

    def _wait_for_entry(self) -> _Entry | None:
        while not self._heap:
            if self._closed:
                return None
            self._sleep(None)
        return heapq.heappop(self._heap)

    def _sleep(self, timeout: float | None) -> None:
        """Wait on the condition (its lock held), counted in ``_waiting`` meanwhile."""
        self._waiting += 1
        try:
            self._cond.wait(timeout)
        finally:
            self._waiting -= 1

    def _start(self, request: Request) -> bool:
        return start_request(request, self.clock(), self.model, self._on_expired)

    def _form_batch(self, first: _Entry, policy: BatchPolicy) -> list[Request]:
        held = [first]
        if first[2].future.timeline is not None:  # tracing: one check per request when off
            first[2].taken = self.clock()
        total = first[2].batch_size
        self._held += 1
        key = first[2].batch_key
        target = policy.max_batch_size
        if policy.preferred_batch_sizes:
            target = min(target, policy.preferred_batch_sizes[-1])
        dispatch_at = first[2].enqueued + policy.max_queue_delay_s
        cap = _PaddedCap(policy, first[2]) if policy.max_padded_elements else None
        skipped: list[_Entry] = []
        try:
            while True:
                while self._heap and total < target and not (cap and cap.full(total)):
                    entry = heapq.heappop(self._heap)
                    request = entry[2]
                    if request.future.cancelled():
                        continue
                    if (
                        request.batch_key != key
                        or total + request.batch_size > target
                        or (cap and not cap.admit(request, total))
                    ):
                        skipped.append(entry)
                        continue
                    held.append(entry)
                    if request.future.timeline is not None:
                        request.taken = self.clock()
                    self._held += 1
                    total += request.batch_size
                for entry in skipped:
                    heapq.heappush(self._heap, entry)
                skipped.clear()
                now = self.clock()
                full = total >= target or (cap is not None and cap.full(total))
                if full or now >= dispatch_at or self._closed:
                    break
                self._sleep(dispatch_at - now)
            held, released = _fit_preferred(held, total, policy.preferred_batch_sizes)
            for entry in released:
                heapq.heappush(self._heap, entry)
        finally:
            self._held = 0
        if released:
            self._cond.notify()
        return [entry[2] for entry in held if self._start(entry[2])]


class _PaddedCap:
    """The padded size of a batch being formed, against ``policy.max_padded_elements``."""

    def __init__(self, policy: BatchPolicy, first: Request) -> None:
        self.limit = policy.max_padded_elements
        self.names = [name for name in policy.ragged if name in first.inputs]
        self.widest = {name: first.inputs[name].shape[1:] for name in self.names}
        self.row = _row_elements(self.widest)

    def admit(self, request: Request, rows: int) -> bool:
        """Widen the batch for ``request`` (joining ``rows`` rows) if it stays in bounds."""
        widest = {
            name: tuple(map(max, self.widest[name], request.inputs[name].shape[1:]))
            for name in self.names
        }
        row = _row_elements(widest)
        if (rows + request.batch_size) * row > self.limit:
            return False
        self.widest, self.row = widest, row
        return True

    def full(self, rows: int) -> bool:
        """No request can join: one more row at the current width is past the bound."""
        return (rows + 1) * self.row > self.limit


def _row_elements(widest: dict[str, tuple[int, ...]]) -> int:
    """Elements of one padded row of the widest ragged input."""
    return max((math.prod(shape) for shape in widest.values()), default=0)


def _fit_preferred(
    held: list[_Entry], total: int, preferred: tuple[int, ...]
) -> tuple[list[_Entry], list[_Entry]]:
    """Trim a batch down to the largest preferred size it can fill exactly, if any."""
    if not preferred or total in preferred:
        return held, []
    fitting = [size for size in preferred if size <= total]
    if not fitting:
        return held, []
    goal = fitting[-1]
    kept: list[_Entry] = []
    released: list[_Entry] = []
    count = 0
    for entry in held:
        if count + entry[2].batch_size <= goal:
            kept.append(entry)
            count += entry[2].batch_size
        else:
            released.append(entry)
    if count != goal:  # sizes don't add up to a preferred size: keep the whole batch
        return held, []
    return kept, released


def start_request(
    request: Request, now: float, model: str, on_expired: Callable[[Request], None]
) -> bool:
    """Mark a request running; False if it was cancelled or its deadline passed (then its
    future is answered DeadlineExceeded and ``on_expired`` told)."""
    if not request.future.set_running_or_notify_cancel():
        return False
    if request.deadline is not None and now > request.deadline:
        request.future.set_exception(
            DeadlineExceeded(
                triton.first(
                    triton.QUEUE_TIMEOUT,
                    f"model {model!r}: the request's timeout passed while it was queued; it "
                    "was not run",
                )
            )
        )
        on_expired(request)
        return False
    return True
