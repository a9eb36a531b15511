"""Open-loop send schedules: when each request is due, independent of any response.

Times are offsets in seconds from the start of a run. A rate is split over ``workers``
generator processes so that together they follow the requested schedule: a constant
schedule deals its ticks out round-robin (worker w sends ticks w, w+W, w+2W, ...), and a
Poisson schedule gives each worker an independent Poisson process of rate/W, whose
superposition is again a Poisson process of the full rate.
"""

from __future__ import annotations

import math

import numpy as np

DISTRIBUTIONS = ("constant", "poisson")


def send_times(
    rate: float,
    duration_s: float,
    *,
    distribution: str = "constant",
    seed: int = 0,
    worker: int = 0,
    workers: int = 1,
) -> np.ndarray:
    """Ascending send offsets (seconds, float64) in [0, duration_s) for one worker."""
    if rate <= 0:
        raise ValueError(f"request rate must be positive, got {rate}")
    if not 0 <= worker < workers:
        raise ValueError(f"worker {worker} out of range for {workers} workers")
    if distribution == "constant":
        step = workers / rate
        first = worker / rate
        count = max(0, math.ceil((duration_s - first) / step)) if first < duration_s else 0
        times = first + step * np.arange(count, dtype=np.float64)
        return times[times < duration_s]
    if distribution == "poisson":
        rng = np.random.default_rng([seed, worker])
        mean_gap = workers / rate
        expected = duration_s / mean_gap
        chunks = []
        last = 0.0
        while last < duration_s:
            size = int(expected + 6 * math.sqrt(expected) + 16)
            chunk = last + np.cumsum(rng.exponential(mean_gap, size))
            chunks.append(chunk)
            last = float(chunk[-1])
        times = np.concatenate(chunks)
        return times[times < duration_s]
    raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")


def split_concurrency(concurrency: int, workers: int) -> list[int]:
    """Closed-loop slots per worker: as even as possible, the first ones taking the rest."""
    base, extra = divmod(concurrency, workers)
    return [base + (1 if i < extra else 0) for i in range(workers)]
