"""What tracing costs: ``tiny`` over HTTP with tracing off, on at rate 1000, on at rate 1.

    python -m benchmarks.tracing [--quick]

Three servers from the same build, one after the other, each pinned to one core with the
load generator (``conveyor bench``, closed loop, binary tensors) on another:

- ``off``: the default; a request pays one attribute check for tracing.
- ``rate 1000``: trace_level TIMESTAMPS, trace_mode triton, 1 request of every 1000 traced.
- ``rate 1``: every request traced and written to Triton's trace file (every 1000 traces).
- ``off again``: the first row once more; how far it lands from the first is the noise.

Then, in process and with no server, the CPU one traced request costs the thread that
answers it (``Tracer.begin`` to ``Tracer.finish``, the engine's stamps included): for the
trace file, and for OpenTelemetry spans (built on the calling thread and handed to an
exporter that drops them, so no network time is counted); and what a request that is not
sampled pays while tracing is on (``Tracer.begin`` answering None).

Writes benchmarks/results/tracing.json and tracing.md. Figures on a shared machine are
noisy: compare the rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks import common
from benchmarks.common import RESULTS, child_env, markdown, ms, pin_plan, pinned, rate
from conveyor.bench import read_json
from conveyor.testing import run_server

VARIANTS = {
    "off": [],
    "rate 1000": ["level=TIMESTAMPS", "rate=1000", "triton,log-frequency=1000"],
    "rate 1": ["level=TIMESTAMPS", "rate=1", "triton,log-frequency=1000"],
    # Off once more, last: the spread between the two off rows is the run's noise.
    "off again": [],
}


def measure(
    variant: str, config: list[str], tmp: Path, concurrency: int, duration: float, warmup: float
) -> dict[str, float | None]:
    server_cpus, generator_cpus = pin_plan()
    if config:
        config = [*config, f"triton,file={tmp / 'trace.json'}"]
    args = [arg for entry in config for arg in ("--trace-config", entry)]
    out = tmp / f"{variant.replace(' ', '-')}.json"
    with pinned(server_cpus), run_server(extra_args=args) as server:
        command = [
            sys.executable, "-m", "conveyor", "bench", "tiny",
            "--url", server.http_url, "-c", str(concurrency), "-d", str(duration),
            "--warmup", str(warmup), "-q", "--json", str(out), "--label", variant,
        ]  # fmt: skip
        with pinned(generator_cpus):
            done = subprocess.run(command, env=child_env(), capture_output=True, text=True)
        if not out.exists():
            raise RuntimeError(f"bench failed:\n{done.stdout}\n{done.stderr}")
    point = read_json(out).points[0]
    return {
        "infer_per_s": point.infer_per_s,
        "p50_ms": point.latency_ms["p50"],
        "p99_ms": point.latency_ms["p99"],
    }


def per_trace_us(mode: str, tmp: Path, count: int) -> float:
    """Microseconds of CPU per traced request, begin to finish (the median of 5 rounds)."""
    import statistics
    import time

    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from conveyor.server.tracing.otel import OTelSink
    from conveyor.server.tracing.settings import TraceLevel, TraceMode, TraceSettings
    from conveyor.server.tracing.tracer import Tracer

    class Dropped(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    settings = TraceSettings(
        trace_level=(TraceLevel.TIMESTAMPS,),
        trace_rate=1,
        log_frequency=1000,
        trace_file=str(tmp / "in-process.json"),
        trace_mode=TraceMode(mode),
    )
    # Unbatched: the spans are built on this thread, so their CPU is counted here (in the
    # server they are built on a thread of their own, still under the GIL).
    sink = OTelSink(Dropped(), batch=False) if mode == "opentelemetry" else None
    tracer = Tracer(settings, otel_sink=sink)
    rounds = []
    for _ in range(5):
        started = time.process_time_ns()
        for _ in range(count):
            trace = tracer.begin("tiny", "http", None)
            assert trace is not None
            timeline = trace.timeline
            now = time.perf_counter_ns()
            trace.decoded = timeline.queue_start = timeline.compute_start = now
            timeline.compute_input_end = timeline.compute_output_start = now
            timeline.compute_end = trace.answered = now
            timeline.batch_size = 1
            tracer.finish(trace)
        rounds.append((time.process_time_ns() - started) / count / 1000)
    tracer.close()
    return statistics.median(rounds)


def unsampled_us(tmp: Path, count: int) -> float:
    """Microseconds of CPU a request that is not sampled pays while tracing is on (rate
    1000: ``Tracer.begin`` answering None), the median of 5 rounds."""
    import statistics
    import time

    from conveyor.server.tracing.settings import TraceLevel, TraceSettings
    from conveyor.server.tracing.tracer import Tracer

    settings = TraceSettings(
        trace_level=(TraceLevel.TIMESTAMPS,),
        trace_rate=count * 10,  # never reached: every call is a request not sampled
        trace_file=str(tmp / "unsampled.json"),
    )
    tracer = Tracer(settings)
    rounds = []
    for _ in range(5):
        started = time.process_time_ns()
        for _ in range(count):
            tracer.begin("tiny", "http", None)
        rounds.append((time.process_time_ns() - started) / count / 1000)
    tracer.close()
    return statistics.median(rounds)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1 s per variant (a smoke test)")
    p.add_argument("--duration", type=float)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    duration = args.duration or (1.0 if args.quick else 4.0)
    warmup = 0.3 if args.quick else 1.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant, config in VARIANTS.items():
            print(f"== tracing {variant}", file=sys.stderr)
            results[variant] = measure(
                variant, config, Path(tmp), args.concurrency, duration, warmup
            )
        costs = {
            mode: per_trace_us(mode, Path(tmp), 2000 if args.quick else 10000)
            for mode in ("triton", "opentelemetry")
        }
        costs["not sampled (rate 1000)"] = unsampled_us(Path(tmp), 20000 if args.quick else 100000)
    base = results["off"]["infer_per_s"] or 1.0
    rows = [("tracing", "infer/s", "vs off", "p50 ms", "p99 ms")]
    for variant, r in results.items():
        throughput = r["infer_per_s"] or 0.0
        rows.append(
            (
                variant,
                rate(throughput),
                f"{throughput / base - 1:+.1%}",
                ms(r["p50_ms"]),
                ms(r["p99_ms"]),
            )
        )
    (out / "tracing.json").write_text(
        json.dumps(
            {
                "concurrency": args.concurrency,
                "duration_s": duration,
                "results": results,
                "per_trace_cpu_us": costs,
            }
        )
    )
    cost_rows = [("trace_mode", "CPU per request, µs")]
    cost_rows += [(mode, f"{us:.1f}") for mode, us in costs.items()]
    text = (
        f"Measured {common.today()} on {common.machine_line()}; `tiny` over HTTP, closed loop "
        f"at concurrency {args.concurrency}, {duration:g} s per variant after {warmup:g} s "
        f"warm-up. Command: `python -m benchmarks.tracing{' --quick' if args.quick else ''}`."
        f"\n\n{markdown(rows, align_left=1)}\n\nIn process, no server (begin to finish):\n\n"
        f"{markdown(cost_rows, align_left=1)}\n"
    )
    (out / "tracing.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
