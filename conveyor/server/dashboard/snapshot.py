"""What the dashboard shows, computed from what the server already knows.

:class:`Snapshots` turns the engine's cumulative counters into rates over a short window
by keeping the last few readings; it is called once per second (by ``feed.py``), never
per page.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conveyor.server.metrics import LatencyHistograms, quantile

if TYPE_CHECKING:
    from conveyor.engine import Engine
    from conveyor.engine.stats import ModelStatistics

# Rates and percentiles are over the last few seconds: steady to read, quick to follow.
WINDOW_S = 5.0
# The chart's span: one point a second.
HISTORY_S = 300
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))

Key = tuple[str, str]  # (model, version)


@dataclasses.dataclass(frozen=True)
class _Reading:
    at: float
    stats: dict[Key, ModelStatistics]
    latency: dict[Key, list[int]]


def _busy_ns(stats: ModelStatistics) -> int:
    """Time the instances spent executing (each batch once, not once per request)."""
    return sum(
        b.compute_input.ns + b.compute_infer.ns + b.compute_output.ns for b in stats.batch_stats
    )


def _ms(ns: int, count: int) -> float | None:
    return round(ns / count / 1e6, 3) if count else None


class Snapshots:
    """Builds a JSON-ready picture of the server on each ``take()``."""

    def __init__(
        self,
        engine: Callable[[], Engine | None],
        histograms: LatencyHistograms | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._histograms = histograms
        self._clock = clock
        self._started = clock()
        self._readings: collections.deque[_Reading] = collections.deque()
        self._history: collections.deque[dict[str, Any]] = collections.deque(maxlen=HISTORY_S)

    def take(self) -> dict[str, Any]:
        now = self._clock()
        engine = self._engine()
        if engine is None:
            return {"ready": False, "uptime_s": round(now - self._started), "models": [],
                    "history": list(self._history)}  # fmt: skip
        stats = {(s.name, str(s.version)): s for s in engine.statistics()}
        latency = self._histograms.counts() if self._histograms is not None else {}
        reading = _Reading(now, stats, latency)
        while self._readings and now - self._readings[0].at > WINDOW_S:
            self._readings.popleft()
        before = self._readings[0] if self._readings else None
        self._readings.append(reading)
        activity = {(a.name, str(a.version)): a for a in engine.activity()}
        models = []
        total_rate = total_failures = 0.0
        worst_p99: float | None = None
        for entry in engine.repository_index():
            key = (entry.name, entry.version)
            model: dict[str, Any] = {
                "name": entry.name,
                "version": entry.version,
                "state": str(entry.state),
                "reason": entry.reason,
            }
            s = stats.get(key)
            a = activity.get(key)
            if a is not None:
                model.update(
                    backend=a.backend,
                    instance_kind=a.instance_kind,
                    instance_count=a.instance_count,
                    workers=[dataclasses.asdict(w) for w in a.workers],
                    recent_errors=[dataclasses.asdict(f) for f in reversed(a.recent_failures)],
                )
            if s is not None:
                model.update(self._figures(s, a.instance_count if a else 1, before, now))
                total_rate += model["requests_per_s"] or 0.0
                total_failures += model["failures_per_s"] or 0.0
                p99 = model["latency_ms"]["p99"]
                if p99 is not None and (worst_p99 is None or p99 > worst_p99):
                    worst_p99 = p99
            models.append(model)
        if before is not None:
            self._history.append(
                {
                    "t": round(time.time(), 3),
                    "requests_per_s": round(total_rate, 2),
                    "failures_per_s": round(total_failures, 2),
                    "p99_ms": worst_p99,
                }
            )
        return {
            "ready": engine.ready,
            "uptime_s": round(now - self._started),
            "window_s": WINDOW_S,
            "models": models,
            "history": list(self._history),
        }

    def _figures(
        self, s: ModelStatistics, instances: int, before: _Reading | None, now: float
    ) -> dict[str, Any]:
        key = (s.name, str(s.version))
        old = before.stats.get(key) if before is not None else None
        elapsed = now - before.at if before is not None else 0.0
        requests_per_s = failures_per_s = utilization = None
        window_counts = self._histogram(key)
        if old is not None and elapsed > 0:
            requests_per_s = round((s.success.count - old.success.count) / elapsed, 2)
            failures_per_s = round((s.fail.count - old.fail.count) / elapsed, 2)
            busy = (_busy_ns(s) - _busy_ns(old)) / 1e9
            utilization = round(min(1.0, busy / (elapsed * max(instances, 1))), 3)
            if before is not None and key in before.latency and window_counts is not None:
                window_counts = [
                    n - o for n, o in zip(window_counts, before.latency[key], strict=True)
                ]
        buckets = self._histograms.buckets if self._histograms is not None else ()
        latency: dict[str, float | None] = {}
        for label, q in QUANTILES:
            value = quantile(buckets, window_counts, q) if window_counts and buckets else None
            latency[label] = round(value * 1000, 3) if value is not None else None
        executions = sum(b.compute_infer.count for b in s.batch_stats)
        return {
            "success": s.success.count,
            "fail": s.fail.count,
            "inference_count": s.inference_count,
            "execution_count": s.execution_count,
            "pending": s.pending,
            "requests_per_s": requests_per_s,
            "failures_per_s": failures_per_s,
            "utilization": utilization,
            "latency_ms": latency,
            "avg_request_ms": _ms(s.success.ns, s.success.count),
            "avg_queue_ms": _ms(s.queue.ns, s.queue.count),
            "avg_compute_ms": _ms(
                s.compute_input.ns + s.compute_infer.ns + s.compute_output.ns,
                s.compute_infer.count,
            ),
            "avg_batch_size": round(s.inference_count / executions, 2) if executions else None,
            "batch_sizes": [
                {"size": b.batch_size, "count": b.compute_infer.count}
                for b in sorted(s.batch_stats, key=lambda b: b.batch_size)
            ],
        }

    def _histogram(self, key: Key) -> list[int] | None:
        return self._readings[-1].latency.get(key) if self._readings else None
