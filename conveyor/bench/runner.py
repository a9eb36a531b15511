"""Run a list of points against one target and model, and return a ``Report``."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Sequence

from conveyor.bench.inputs import INPUT_DATA, ModelSpec, make_inputs, parse_shapes
from conveyor.bench.loadgen import Point
from conveyor.bench.progress import Progress
from conveyor.bench.report import PointResult, Report, machine, now_iso, point_result
from conveyor.bench.server_stats import StatsTotals, split
from conveyor.bench.targets.base import TargetSpec
from conveyor.bench.targets.pick import make_client, make_control
from conveyor.bench.workers import GeneratorProcesses, LocalRunner
from conveyor.options import option

_START_DELAY_S = 0.2  # lets every worker be waiting before the first request is due


@dataclasses.dataclass(frozen=True)
class BenchSpec:
    """What one run sends and how: the target, the request's tensors, the generators.

    The fields with help text are ``conveyor bench`` options (``conveyor.options``).
    """

    target: TargetSpec
    batch_size: int = dataclasses.field(
        default=1,
        metadata=option(
            "the first dimension of inputs whose first dimension is dynamic",
            flags=("-b", "--batch-size"),
        ),
    )
    shapes: dict = dataclasses.field(
        default_factory=dict,
        metadata=option(
            "an input's shape (without the batch dimension when the model batches); repeat "
            "for more inputs (default: the model's, -1 as 1)",
            flags=("--shape",),
            metavar="NAME:D1,D2",
            convert=parse_shapes,
        ),
    )
    input_data: str = dataclasses.field(
        default="random",
        metadata=option(f"{' | '.join(INPUT_DATA)} | FILE.npz (arrays named by input)"),
    )
    processes: int = dataclasses.field(
        default=1, metadata=option("generator processes", flags=("-p", "--processes"))
    )
    seed: int = dataclasses.field(
        default=0, metadata=option("seed of the random inputs and of Poisson schedules")
    )
    label: str = dataclasses.field(
        default="",
        metadata=option("name of this run in the table and plots (default: TRANSPORT MODEL)"),
    )
    model_spec: ModelSpec | None = None  # skip asking the server (e.g. a canned peer)


def run_bench(
    bench: BenchSpec, points: Sequence[Point], *, progress: bool = True, command: str | None = None
) -> Report:
    spec = bench.target
    if spec.scheme == "inprocess" and bench.processes != 1:
        raise ValueError("the inprocess target runs in one process (--processes 1)")
    control = make_control(spec)
    try:
        model = bench.model_spec or control.describe()
        inputs = make_inputs(
            model,
            batch_size=bench.batch_size,
            shapes=bench.shapes,
            data=bench.input_data,
            seed=bench.seed,
        )
        report = Report(
            label=bench.label or f"{spec.label} {spec.model}",
            target=spec.url,
            transport=spec.label,
            model=spec.model,
            batch_size=bench.batch_size,
            shapes={name: list(array.shape) for name, array in inputs.items()},
            input_data=bench.input_data,
            created=now_iso(),
            machine=machine(),
            command=command if command is not None else " ".join(sys.argv),
        )
        if bench.processes == 1:
            runner: LocalRunner | GeneratorProcesses = LocalRunner(
                lambda: make_client(spec, inputs, control)
            )
        else:
            runner = GeneratorProcesses(spec, inputs, bench.processes)
        try:
            for point in points:
                report.points.append(
                    _measure(runner, control, point, bench, report.label, progress)
                )
        finally:
            runner.close()
        return report
    finally:
        control.close()


def _measure(
    runner, control, point: Point, bench: BenchSpec, label: str, progress: bool
) -> PointResult:
    start_ns = time.monotonic_ns() + int(_START_DELAY_S * 1e9)
    before: list[StatsTotals | None] = [None]

    def snapshot() -> None:
        before[0] = control.statistics()

    # The server's counters are read when the measurement window opens (after the warm-up).
    timer = threading.Timer(_START_DELAY_S + point.warmup_s, snapshot)
    timer.daemon = True
    timer.start()
    what = f"c={point.concurrency}" if point.mode == "closed" else f"rate={point.rate:g}/s"
    bar = Progress(
        f"{label} {what}",
        _START_DELAY_S + point.warmup_s + point.duration_s,
        runner.progress,
        enabled=progress,
    )
    with bar:
        results = runner.run(point, start_ns)
        timer.join(timeout=30)
        after = control.statistics()
        server = split(before[0], after) if before[0] is not None and after is not None else None
        result = point_result(point, results, bench.batch_size, server)
        lat = result.latency_ms
        bar.finish(
            f"{result.infer_per_s:,.0f} infer/s, p50 {_fmt(lat['p50'])} ms, "
            f"p99 {_fmt(lat['p99'])} ms, errors {result.errors}"
        )
    return result


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
