"""The load generator of one worker: closed loop at a concurrency, or open loop on a schedule.

Closed loop: ``concurrency`` slots, each sending its next request the moment the previous
answer arrives; latency runs from the send. Open loop: requests are due at scheduled
times whatever the server does, and latency runs from the SCHEDULED time, so a server
that stalls is charged for every request it kept waiting, including those the generator
could not even send yet (no coordinated omission). How late the generator itself sent
(``send_lag``) is reported beside it, so a lagging generator is visible.

Both loops measure only the window after the warm-up: latencies of the requests that
started in it, completions that fell in it (the throughput), errors of requests that
started in it. Every wait is bounded: requests still running ``drain_s`` after the window
are cancelled and counted as ``unfinished``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import MutableSequence

import numpy as np

from conveyor.bench.schedule import DISTRIBUTIONS, send_times
from conveyor.bench.targets.base import Client

_ERROR_SAMPLES = 5


@dataclasses.dataclass(frozen=True)
class Point:
    """One measurement: closed loop (``concurrency``) or open loop (``rate`` per second)."""

    concurrency: int | None = None
    rate: float | None = None
    distribution: str = "constant"
    warmup_s: float = 1.0
    duration_s: float = 5.0
    max_inflight: int = 1024
    drain_s: float = 10.0
    seed: int = 0
    # Open loop: busy-wait (yielding to the loop) this long before each send. Timers wake
    # up to ~1 ms late, which shows as send lag; spinning the last stretch cuts the lag to
    # microseconds but keeps a core busy, which on a small machine is the server's core.
    # Off by default: the lag is measured and reported either way.
    spin_s: float = 0.0

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("a point is either closed loop (concurrency) or open loop (rate)")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {DISTRIBUTIONS}")
        if self.duration_s <= 0 or self.warmup_s < 0:
            raise ValueError("duration must be > 0 and warm-up >= 0")
        if self.spin_s < 0:
            raise ValueError(f"spin must be >= 0 seconds, got {self.spin_s}")

    @property
    def mode(self) -> str:
        return "closed" if self.concurrency is not None else "open"


@dataclasses.dataclass
class WorkerResult:
    latencies_ns: np.ndarray
    send_lag_ns: np.ndarray
    completed: int = 0
    errors: int = 0
    unfinished: int = 0
    sent: int = 0
    throttled: int = 0  # open loop: requests that waited for a free slot (max_inflight)
    error_samples: list[str] = dataclasses.field(default_factory=list)
    cpu_s: float = 0.0  # this worker process's CPU time over the run: the generator's cost
    wall_s: float = 0.0


class _Recorder:
    def __init__(self, window_start: int, window_end: int) -> None:
        self.window_start = window_start
        self.window_end = window_end
        self.latencies: list[int] = []
        self.lags: list[int] = []
        self.completed = 0
        self.errors = 0
        self.sent = 0
        self.done_total = 0
        self.samples: list[str] = []
        self.throttled = 0

    def record(self, origin: int, sent: int, end: int, error: BaseException | None) -> None:
        self.done_total += 1
        in_window = self.window_start <= origin < self.window_end
        if error is not None:
            if in_window:
                self.errors += 1
            text = f"{type(error).__name__}: {error}"
            if len(self.samples) < _ERROR_SAMPLES and text not in self.samples:
                self.samples.append(text)
            return
        if in_window:
            self.latencies.append(end - origin)
            self.lags.append(sent - origin)
        if self.window_start <= end < self.window_end:
            self.completed += 1

    def result(self, unfinished: int) -> WorkerResult:
        return WorkerResult(
            latencies_ns=np.asarray(self.latencies, dtype=np.int64),
            send_lag_ns=np.asarray(self.lags, dtype=np.int64),
            completed=self.completed,
            errors=self.errors + unfinished,
            unfinished=unfinished,
            sent=self.sent,
            throttled=self.throttled,
            error_samples=self.samples,
        )


async def _sleep_until(deadline_ns: int, spin_ns: int = 0) -> None:
    """Return at ``deadline_ns`` or after; spin (yielding) only the last ``spin_ns``."""
    wake = deadline_ns - spin_ns
    now = time.monotonic_ns()
    while now < wake:
        # Whole milliseconds, rounded up: uvloop's timers count in milliseconds and may fire
        # before a fractional delay is over; a shorter sleep would then round to 0 and the
        # loop would spin after all.
        await asyncio.sleep(-(-(wake - now) // 1_000_000) / 1e3)
        now = time.monotonic_ns()
    while spin_ns and time.monotonic_ns() < deadline_ns:
        await asyncio.sleep(0)


async def _one(client: Client, origin: int, rec: _Recorder, dispatched: int) -> None:
    rec.sent += 1
    sent = dispatched
    error: BaseException | None = None
    try:
        await client.infer()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        error = exc
    rec.record(origin, sent, time.monotonic_ns(), error)


async def _closed_slot(client: Client, end: int, rec: _Recorder) -> None:
    monotonic_ns = time.monotonic_ns
    while True:
        start = monotonic_ns()
        if start >= end:
            return
        await _one(client, start, rec, start)


async def _open_schedule(
    client: Client,
    times_ns: np.ndarray,
    max_inflight: int,
    spin_ns: int,
    rec: _Recorder,
    tasks: set,
) -> None:
    gate = asyncio.Semaphore(max_inflight)

    async def due(origin: int) -> None:
        dispatched = time.monotonic_ns()  # the send lag ends here: the generator was on time
        if gate.locked() and rec.window_start <= origin < rec.window_end:
            rec.throttled += 1
        async with gate:  # waiting here is part of the latency: it runs from ``origin``
            await _one(client, origin, rec, dispatched)

    for origin in times_ns.tolist():
        if time.monotonic_ns() < origin:
            await _sleep_until(origin, spin_ns)
        task = asyncio.create_task(due(origin))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


async def _report_progress(rec: _Recorder, progress: MutableSequence[int], index: int) -> None:
    while True:
        progress[index] = rec.done_total
        await asyncio.sleep(0.1)


async def run_point(
    client: Client,
    point: Point,
    start_ns: int,
    *,
    slots: int,
    worker: int = 0,
    workers: int = 1,
    progress: MutableSequence[int] | None = None,
) -> WorkerResult:
    """Run this worker's share of ``point``, starting at ``start_ns`` (time.monotonic_ns).

    ``slots`` is this worker's share of the concurrency (closed loop); the open-loop schedule
    is split between ``workers`` by ``schedule.send_times``.
    """
    window_start = start_ns + int(point.warmup_s * 1e9)
    window_end = window_start + int(point.duration_s * 1e9)
    rec = _Recorder(window_start, window_end)
    reporter = (
        asyncio.create_task(_report_progress(rec, progress, worker))
        if progress is not None
        else None
    )
    tasks: set[asyncio.Task] = set()
    try:
        await _sleep_until(start_ns)
        cpu_start = time.process_time()
        if point.concurrency is not None:
            for _ in range(slots):
                tasks.add(asyncio.create_task(_closed_slot(client, window_end, rec)))
        else:
            assert point.rate is not None
            offsets = send_times(
                point.rate,
                point.warmup_s + point.duration_s,
                distribution=point.distribution,
                seed=point.seed,
                worker=worker,
                workers=workers,
            )
            times_ns = start_ns + (offsets * 1e9).astype(np.int64)
            spin_ns = int(point.spin_s * 1e9)
            await _open_schedule(client, times_ns, point.max_inflight, spin_ns, rec, tasks)
        unfinished = 0
        if tasks:
            left = max(0.0, (window_end - time.monotonic_ns()) / 1e9) + point.drain_s
            _done, pending = await asyncio.wait(set(tasks), timeout=left)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
            unfinished = len(pending)
        result = rec.result(unfinished)
        result.cpu_s = time.process_time() - cpu_start
        result.wall_s = (time.monotonic_ns() - start_ns) / 1e9
        return result
    finally:
        if reporter is not None:
            reporter.cancel()
        if progress is not None:  # exactly when there is a reporter
            progress[worker] = rec.done_total


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed (it is a dependency on Linux): the generator's cost is its loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
