"""The generator's loops: short real runs against the in-process engine, plus a stand-in client."""

import asyncio
import time

import numpy as np
import pytest

from conveyor.bench import BenchSpec, Point, TargetSpec, run_bench
from conveyor.bench.loadgen import new_event_loop, run_point
from conveyor.bench.targets.base import Client

SHORT = dict(warmup_s=0.1, duration_s=0.5, drain_s=5.0)


class SleepClient(Client):
    """Answers after ``delay_s``, one call at a time like a single-threaded server."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls = 0
        self._lock: asyncio.Lock | None = None

    async def infer(self) -> None:
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            self.calls += 1
            await asyncio.sleep(self.delay_s)


def _run(client, point):
    loop = new_event_loop()
    try:
        start = time.monotonic_ns() + 50_000_000
        slots = point.concurrency or 0
        return loop.run_until_complete(run_point(client, point, start, slots=slots))
    finally:
        loop.close()


def test_open_loop_latency_runs_from_the_scheduled_time():
    # Due every 10 ms, answered every 30 ms: the backlog grows by 2 per 30 ms, and each
    # request's latency counts its wait in that backlog, not only its own 30 ms.
    point = Point(rate=100, warmup_s=0.0, duration_s=0.6, drain_s=5.0, max_inflight=1)
    result = _run(SleepClient(0.03), point)
    latencies_ms = np.sort(result.latencies_ns) / 1e6
    assert len(latencies_ms) == 60  # every scheduled request of the window, none dropped
    # The first met an idle server: its own 30 ms (timers are coarse), not a backlog.
    assert 25 < latencies_ms[0] < latencies_ms[-1] / 4
    assert latencies_ms[-1] > 1000  # the 60th was due at 0.59 s and answered at ~1.8 s
    # The generator itself was on time; the requests waited for the one in-flight slot
    # (relative, and the median, so a busy machine that delays a few sends does not fail it).
    assert np.percentile(result.send_lag_ns, 50) < np.percentile(result.latencies_ns, 50) / 4
    assert result.throttled >= 55
    assert result.errors == 0 and result.unfinished == 0


def test_open_loop_keeps_the_schedule_when_the_server_keeps_up():
    point = Point(rate=200, warmup_s=0.0, duration_s=0.5, drain_s=5.0)
    result = _run(SleepClient(0.0), point)
    assert len(result.latencies_ns) == 100
    # Sent on schedule: the median send is late by less than the 5 ms between sends.
    assert np.percentile(result.send_lag_ns, 50) / 1e6 < 5.0


def test_closed_loop_keeps_concurrency_requests_in_flight():
    class Overlap(Client):
        def __init__(self):
            self.now = self.peak = 0

        async def infer(self):
            self.now += 1
            self.peak = max(self.peak, self.now)
            await asyncio.sleep(0.005)
            self.now -= 1

    client = Overlap()
    result = _run(client, Point(concurrency=8, **SHORT))
    assert client.peak == 8
    # 8 in flight, 5 ms each: about 1,600/s, so about 800 in 0.5 s (timers are coarse).
    assert 100 < result.completed < 900
    assert np.median(result.latencies_ns) / 1e6 == pytest.approx(5, abs=4)


def test_failures_are_counted_with_samples():
    class Failing(Client):
        async def infer(self):
            await asyncio.sleep(0.001)
            raise RuntimeError("model exploded")

    result = _run(Failing(), Point(concurrency=2, **SHORT))
    assert result.errors > 10 and len(result.latencies_ns) == 0
    assert result.error_samples == ["RuntimeError: model exploded"]


def test_requests_still_running_after_the_drain_are_cancelled_and_counted():
    result = _run(
        SleepClient(30.0), Point(concurrency=3, warmup_s=0.0, duration_s=0.2, drain_s=0.2)
    )
    assert result.unfinished == 3 and result.errors == 3


def test_inprocess_closed_loop_reports_throughput_latency_and_the_server_split():
    report = run_bench(
        BenchSpec(TargetSpec("inprocess", "tiny")),
        [Point(concurrency=1, **SHORT), Point(concurrency=4, **SHORT)],
        progress=False,
    )
    assert [p.concurrency for p in report.points] == [1, 4]
    for p in report.points:
        assert p.errors == 0 and p.requests > 50
        assert p.throughput == pytest.approx(p.requests / 0.5)
        lat = p.latency_ms
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
        server = p.server
        assert server is not None
        assert server["requests"] == pytest.approx(p.requests, rel=0.2)
        assert server["compute_infer_us"] > 0 and server["queue_us"] >= 0
        assert server["avg_batch"] == 1.0


def test_open_loop_against_a_slow_inprocess_model_charges_the_wait(repo, tmp_path):
    # One instance, 40 ms per request, 50 requests/s due: capacity is 25/s, so the queue in
    # the engine grows and latency from the schedule reaches far beyond 40 ms.
    repo.sleep_model("sleep", instances=1, queue=256)
    data = tmp_path / "in.npz"
    np.savez(data, INPUT0=np.array([0.04], np.float32))
    report = run_bench(
        BenchSpec(
            TargetSpec("inprocess", "sleep", repository=str(repo.path)), input_data=str(data)
        ),
        [Point(rate=50, warmup_s=0.0, duration_s=0.8, drain_s=10.0)],
        progress=False,
    )
    (point,) = report.points
    assert point.errors == 0 and point.latency_ms["count"] == 40
    assert point.latency_ms["max"] > 500
    # The generator was (mostly) on time; the server was not. Relative, and the median, so
    # a busy machine that delays a few sends does not fail it.
    assert point.send_lag_ms["p50"] < point.latency_ms["p50"] / 4
    assert point.server["queue_us"] > 100_000


def test_model_errors_are_reported(repo, tmp_path):
    repo.sleep_model("sleep")
    data = tmp_path / "in.npz"
    np.savez(data, INPUT0=np.array([-1.0], np.float32))  # time.sleep(-1) raises
    report = run_bench(
        BenchSpec(
            TargetSpec("inprocess", "sleep", repository=str(repo.path)), input_data=str(data)
        ),
        [Point(concurrency=1, warmup_s=0.0, duration_s=0.3)],
        progress=False,
    )
    (point,) = report.points
    assert point.errors > 0 and point.requests == 0
    assert any("ModelError" in s for s in point.error_samples)
