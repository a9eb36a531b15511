"""Latency percentiles by the nearest-rank method.

Nearest rank (the smallest sample with at least p% of the samples at or below it) always
returns a latency that was really observed, never an interpolation between two, which is
what a reader of "p99 = 2.1 ms" expects: 99% of requests took at most that long.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

REPORTED = (50.0, 90.0, 99.0)


def percentile(sorted_values: Sequence[float] | np.ndarray, p: float) -> float:
    """The nearest-rank ``p``-th percentile (0 <= p <= 100) of ascending ``sorted_values``."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no samples")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    rank = max(1, math.ceil(p / 100.0 * n - 1e-9))  # 1e-9: 0.9 * 10 must be rank 9, not 10
    return float(sorted_values[min(rank, n) - 1])


@dataclasses.dataclass(frozen=True)
class LatencySummary:
    """Milliseconds; all None when no request completed."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return dataclasses.asdict(self)


def summarize(latencies_ns: np.ndarray | Sequence[int]) -> LatencySummary:
    """Count, mean, p50/p90/p99 and max (in ms) of latencies given in nanoseconds."""
    values = np.sort(np.asarray(latencies_ns, dtype=np.float64)) / 1e6
    if values.size == 0:
        return LatencySummary(0, None, None, None, None, None)
    p50, p90, p99 = (percentile(values, p) for p in REPORTED)
    return LatencySummary(
        count=int(values.size),
        mean=float(values.mean()),
        p50=p50,
        p90=p90,
        p99=p99,
        max=float(values[-1]),
    )
