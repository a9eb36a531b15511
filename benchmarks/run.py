"""The benchmark suite: one command, fixed scenarios, one Markdown table and plots.

    python -m benchmarks.run            # about 5 minutes: 5 s per point after a 1 s warm-up
    python -m benchmarks.run --quick    # a smoke run: about 1 s per point

Scenarios: models ``tiny``, ``mlp`` (dynamic batching on) and ``identity`` with a 4 MiB FP32
tensor; transports HTTP with binary tensors, HTTP with JSON, and gRPC with raw contents;
closed loop at concurrency 1, 4 and 16, batch 1 (and gRPC once more with every request
on one ModelStreamInfer stream, which costs the generator half as much per request).
Each figure stands beside the in-process figure of the same run (the engine driven by the
same generator in one process, no server) and their ratio. ``conveyor serve`` runs
pinned to core 0, and so does the in-process run; the generator runs on core 1 (where the
machine has two cores).

Writes benchmarks/results/suite.md (the table), suite.json (every report) and one plot per
model (latency percentiles against throughput, all transports), then prints the table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from benchmarks import common
from benchmarks.common import IDENTITY_SHAPE, RESULTS, markdown, ms, pin_plan, pinned, rate, serve
from conveyor.bench import BenchSpec, Point, Report, TargetSpec, run_bench
from conveyor.bench.plot import plot_reports

MODELS = ("tiny", "mlp", "identity")
TRANSPORTS = ("http-binary", "http-json", "grpc", "grpc-stream")
CONCURRENCY = (1, 4, 16)


def target(transport: str, model: str, http_url: str, grpc_url: str) -> TargetSpec:
    if transport.startswith("grpc"):
        return TargetSpec(grpc_url, model, streaming=transport == "grpc-stream")
    return TargetSpec(http_url, model, encoding=transport.removeprefix("http-"))


def table(reports: dict[tuple[str, str], Report]) -> str:
    rows = [
        (
            "model",
            "transport",
            "c",
            "infer/s",
            "p50 ms",
            "p99 ms",
            "errors",
            "gen cpu",
            "server queue / infer µs",
            "in-process infer/s",
            "in-process p50 ms",
            "ratio",
        )
    ]
    for (model, transport), report in reports.items():
        if transport == "inprocess":
            continue
        base = {p.concurrency: p for p in reports[(model, "inprocess")].points}
        for p in report.points:
            ref = base.get(p.concurrency)
            server = p.server or {}
            split = (
                f"{server['queue_us']:.0f} / {server['compute_infer_us']:.0f}"
                if server.get("queue_us") is not None
                else "-"
            )
            ratio = f"{p.infer_per_s / ref.infer_per_s:.2f}" if ref and ref.infer_per_s else "-"
            rows.append(
                (
                    model,
                    transport,
                    str(p.concurrency),
                    rate(p.infer_per_s),
                    ms(p.latency_ms["p50"]),
                    ms(p.latency_ms["p99"]),
                    str(p.errors),
                    f"{p.generator_cpu:.2f}",
                    split,
                    rate(ref.infer_per_s) if ref else "-",
                    ms(ref.latency_ms["p50"]) if ref else "-",
                    ratio,
                )
            )
    return markdown(rows, align_left=3)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="about 1 s per point (a smoke run)")
    p.add_argument("--duration", type=float, help="measured seconds per point (default 5)")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--transports", default=",".join(TRANSPORTS))
    p.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)))
    p.add_argument("--http-url", help="use this running server instead of starting one")
    p.add_argument("--grpc-url")
    p.add_argument("--out", default=str(RESULTS), help="folder for the table, JSON and plots")
    args = p.parse_args(argv)
    duration = args.duration or (1.0 if args.quick else 5.0)
    warmup = 0.3 if args.quick else 1.0
    models = [m for m in args.models.split(",") if m]
    transports = [t for t in args.transports.split(",") if t]
    concurrency = [int(c) for c in args.concurrency.split(",")]
    server_cpus, generator_cpus = pin_plan()
    out = common.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    reports: dict[tuple[str, str], Report] = {}
    points = [Point(concurrency=c, warmup_s=warmup, duration_s=duration) for c in concurrency]
    for model in models:
        shapes = IDENTITY_SHAPE if model == "identity" else {}
        print(f"== {model}: in-process", file=sys.stderr)
        reports[(model, "inprocess")] = common.run_inprocess(
            model, concurrency, duration=duration, warmup=warmup, cpus=server_cpus, shapes=shapes
        )
    with (
        serve(server_cpus, args.http_url, args.grpc_url) as (http_url, grpc_url),
        pinned(generator_cpus),
    ):
        for model in models:
            shapes = IDENTITY_SHAPE if model == "identity" else {}
            for transport in transports:
                print(f"== {model}: {transport}", file=sys.stderr)
                spec = target(transport, model, http_url, grpc_url)
                reports[(model, transport)] = run_bench(
                    BenchSpec(spec, shapes=shapes, label=f"{transport} {model}"),
                    points,
                    command="python -m benchmarks.run",
                )
    for model in models:
        plot_reports(
            [r for (m, _t), r in reports.items() if m == model],
            out / f"{model}.png",
            title=f"{model}: conveyor serve vs in-process",
        )
    pinning = (
        f"server and in-process runs on core {sorted(server_cpus)[0]}, generator on "
        f"core {sorted(generator_cpus)[0]}"
        if server_cpus and generator_cpus
        else "not pinned (fewer than 2 cores)"
    )
    command = common.command_line("benchmarks.run", argv)
    measured = (
        f"Measured {common.today()} on {common.machine_line()}; {pinning}; closed loop, "
        f"batch 1, {duration:g} s per point after {warmup:g} s warm-up. Command: "
        f"`{command}`. Ratio = served infer/s / in-process infer/s at the same "
        f"concurrency. gen cpu = cores the load generator used (1.00 = its core was full)."
    )
    data = [{"model": m, "transport": t, **r.to_dict()} for (m, t), r in reports.items()]
    text = common.write_report(out, "suite", measured, table(reports), data)
    print(text)
    print(f"({time.monotonic() - started:.0f} s; table, JSON and plots in {out})", file=sys.stderr)
    return 0 if all(p.errors == 0 for r in reports.values() for p in r.points) else 1


if __name__ == "__main__":
    sys.exit(main())
