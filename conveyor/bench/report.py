"""A benchmark report: one entry per measured point, as JSON and as a text table."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from conveyor.bench.loadgen import Point, WorkerResult
from conveyor.bench.percentiles import summarize
from conveyor.bench.server_stats import ServerSplit

FORMAT = "conveyor-bench/1"
# Timers wake up to a millisecond or two late (sends are not spun for by default), so a
# lag below this is the clock's granularity, not a generator that cannot keep up.
_LATE_SEND_MS = 2.0


@dataclasses.dataclass
class PointResult:
    mode: str  # "closed" or "open"
    concurrency: int | None
    request_rate: float | None
    distribution: str | None
    processes: int
    duration_s: float
    requests: int  # completed inside the measurement window
    throughput: float  # requests per second
    infer_per_s: float  # throughput x batch size
    errors: int
    unfinished: int
    latency_ms: dict  # count, mean, p50, p90, p99, max (open loop: from the scheduled time)
    send_lag_ms: dict | None  # open loop: how late the generator sent, after the schedule
    throttled: int  # open loop: requests that waited for one of --max-inflight slots
    generator_cpu: float  # CPU-seconds per second the generator processes used (1.0 = a core)
    server: dict | None  # ServerSplit: the server's statistics diffed over the run
    error_samples: list[str] = dataclasses.field(default_factory=list)

    @property
    def x_label(self) -> str:
        if self.mode == "closed":
            return f"c={self.concurrency}"
        return f"r={self.request_rate:g}"


@dataclasses.dataclass
class Report:
    label: str
    target: str
    transport: str
    model: str
    batch_size: int
    shapes: dict
    input_data: str
    created: str
    machine: dict
    command: str
    points: list[PointResult] = dataclasses.field(default_factory=list)
    format: str = FORMAT

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Report:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a conveyor bench report (format {data.get('format')!r})")
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["points"] = [PointResult(**p) for p in data.get("points", [])]
        return cls(**values)


def machine() -> dict:
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpus": os.cpu_count(),
        "affinity": affinity,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        # Other work on the machine skews every figure: keep the evidence with the figures.
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def point_result(
    point: Point,
    results: Sequence[WorkerResult],
    batch_size: int,
    server: ServerSplit | None,
) -> PointResult:
    latencies = np.concatenate([r.latencies_ns for r in results])
    requests = sum(r.completed for r in results)
    samples: list[str] = []
    for r in results:
        samples.extend(s for s in r.error_samples if s not in samples)
    wall = max((r.wall_s for r in results), default=0.0)
    throughput = requests / point.duration_s
    return PointResult(
        mode=point.mode,
        concurrency=point.concurrency,
        request_rate=point.rate,
        distribution=point.distribution if point.mode == "open" else None,
        processes=len(results),
        duration_s=point.duration_s,
        requests=requests,
        throughput=throughput,
        infer_per_s=throughput * batch_size,
        errors=sum(r.errors for r in results),
        unfinished=sum(r.unfinished for r in results),
        latency_ms=summarize(latencies).as_dict(),
        send_lag_ms=(
            summarize(np.concatenate([r.send_lag_ns for r in results])).as_dict()
            if point.mode == "open"
            else None
        ),
        throttled=sum(r.throttled for r in results),
        generator_cpu=sum(r.cpu_s for r in results) / wall if wall > 0 else 0.0,
        server=server.as_dict() if server is not None else None,
        error_samples=samples[:5],
    )


def write_json(report: Report, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    return path


def read_json(path: str | Path) -> Report:
    return Report.from_dict(json.loads(Path(path).read_text()))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def format_table(report: Report) -> str:
    """A plain text table, one line per point."""
    head = (
        f"{report.label}: {report.model} via {report.transport} ({report.target}), "
        f"batch {report.batch_size}"
    )
    columns = (
        "point",
        "infer/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "errors",
        "gen cpu",
        "srv queue/in/infer/out us",
        "batch",
    )
    rows = [columns]
    for p in report.points:
        lat = p.latency_ms
        server = p.server
        split = (
            "/".join(
                _us(server[k])
                for k in ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")
            )
            if server
            else "-"
        )
        batch = f"{server['avg_batch']:.1f}" if server and server.get("avg_batch") else "-"
        rows.append(
            (
                p.x_label,
                f"{p.infer_per_s:,.0f}",
                _ms(lat["p50"]),
                _ms(lat["p90"]),
                _ms(lat["p99"]),
                _ms(lat["max"]),
                str(p.errors),
                f"{p.generator_cpu:.2f}",
                split,
                batch,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = [head]
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    for p in report.points:
        for sample in p.error_samples:
            lines.append(f"  {p.x_label} error: {sample}")
        lag_p99 = (p.send_lag_ms or {}).get("p99")
        if lag_p99 is not None and lag_p99 > _LATE_SEND_MS:
            lines.append(
                f"  {p.x_label}: the generator sent late (send lag p99 "
                f"{lag_p99:.1f} ms): it may be the bottleneck"
            )
        if p.throttled:
            lines.append(
                f"  {p.x_label}: {p.throttled} requests waited for one of the "
                f"--max-inflight slots (their wait is in their latency)"
            )
    return "\n".join(lines)
