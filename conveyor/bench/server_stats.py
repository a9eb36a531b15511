"""The server's own account of a run, from the statistics extension, diffed before/after.

Totals are read as Triton's statistics JSON (``GET /v2/models/{m}/stats``; the gRPC answer
is converted to the same shape). Per request, the server splits its time into queue,
compute-input, compute-infer and compute-output; dividing the growth of each total by the
growth of its count gives the average of each part over exactly the measured requests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

PARTS = ("queue", "compute_input", "compute_infer", "compute_output")


@dataclasses.dataclass(frozen=True)
class StatsTotals:
    """Cumulative counters of one model version (counts and nanoseconds)."""

    success: int = 0
    fail: int = 0
    inference_count: int = 0
    execution_count: int = 0
    counts: tuple[int, ...] = (0, 0, 0, 0)  # per PARTS
    ns: tuple[int, ...] = (0, 0, 0, 0)

    @classmethod
    def from_json(cls, body: Mapping, model: str, version: str = "") -> StatsTotals | None:
        """Sum the matching entries of ``model_stats`` (every version when none is given)."""
        entries = [
            m
            for m in body.get("model_stats", ())
            if m.get("name") == model and (not version or str(m.get("version")) == version)
        ]
        if not entries:
            return None
        success = fail = infer = execs = 0
        counts = [0, 0, 0, 0]
        ns = [0, 0, 0, 0]
        for entry in entries:
            stats = entry.get("inference_stats", {})
            success += int(stats.get("success", {}).get("count", 0))
            fail += int(stats.get("fail", {}).get("count", 0))
            infer += int(entry.get("inference_count", 0))
            execs += int(entry.get("execution_count", 0))
            for i, part in enumerate(PARTS):
                counts[i] += int(stats.get(part, {}).get("count", 0))
                ns[i] += int(stats.get(part, {}).get("ns", 0))
        return cls(success, fail, infer, execs, tuple(counts), tuple(ns))


@dataclasses.dataclass(frozen=True)
class ServerSplit:
    """What the server says about the measured requests: averages in microseconds."""

    requests: int
    failures: int
    queue_us: float | None
    compute_input_us: float | None
    compute_infer_us: float | None
    compute_output_us: float | None
    avg_batch: float | None  # items per model execution (dynamic batching at work when > 1)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def split(before: StatsTotals, after: StatsTotals) -> ServerSplit:
    averages = []
    for i in range(len(PARTS)):
        count = after.counts[i] - before.counts[i]
        averages.append((after.ns[i] - before.ns[i]) / count / 1e3 if count > 0 else None)
    executions = after.execution_count - before.execution_count
    items = after.inference_count - before.inference_count
    return ServerSplit(
        requests=after.success - before.success,
        failures=after.fail - before.fail,
        queue_us=averages[0],
        compute_input_us=averages[1],
        compute_infer_us=averages[2],
        compute_output_us=averages[3],
        avg_batch=items / executions if executions > 0 else None,
    )
