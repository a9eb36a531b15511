"""Large tensors and small gRPC calls, in one run: this tree against a baseline and ceilings.

    python -m benchmarks.large_tensors                      # this tree only, ~1 minute
    python -m benchmarks.large_tensors --baseline HEAD~5    # and the same points on that commit

Scenarios (closed loop, batch 1): ``identity`` with a 4 MiB FP32 tensor at concurrency 4 over
HTTP (binary extension) and gRPC (raw contents); ``tiny`` over gRPC unary and over one
ModelStreamInfer stream at concurrency 16. The gRPC scenarios run once per gRPC transport
(``--grpc-transport conveyor``, Conveyor's own HTTP/2 server, and ``grpcio``), each a column.
Beside them: the in-process engine on the same model and concurrency (the limit a server is
held to), and servers that answer a canned response without inference (what the generator
and the transport cost): ``conveyor bench ceiling``'s, and the same canned gRPC service on
Conveyor's transport (``benchmarks/grpc_ceiling.py``).

The server runs pinned to core 0, the generator to core 1. ``--baseline REF`` extracts that
commit with ``git archive`` into a temporary folder and serves it the same way right after
this tree's server, so both columns come from one run on one (noisy, shared) machine; read
the ratio, not the absolute figures. Writes ``benchmarks/results/large_tensors.md`` and
``.json`` and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks import common, grpc_ceiling
from benchmarks.common import IDENTITY_SHAPE, markdown, ms, pin_plan, pinned, rate
from conveyor.bench import BenchSpec, Point, Report, TargetSpec, run_bench
from conveyor.bench.ceiling import measure as measure_ceiling
from conveyor.testing import free_port, wait_ready

# (label, model, transport, concurrency)
SCENARIOS = (
    ("4 MiB identity, HTTP binary", "identity", "http", 4),
    ("4 MiB identity, gRPC", "identity", "grpc", 4),
    ("tiny, gRPC unary", "tiny", "grpc", 16),
    ("tiny, gRPC stream", "tiny", "grpc-stream", 16),
)
TARGETS = {
    "4 MiB identity, HTTP binary": 300,
    "4 MiB identity, gRPC": 250,
    "tiny, gRPC unary": 4000,
    "tiny, gRPC stream": 8000,
}


TRANSPORTS = ("conveyor", "grpcio")


@contextlib.contextmanager
def serve_tree(
    root: Path, cpus: set[int] | None, transport: str | None = None
) -> Iterator[tuple[str, str]]:
    """``conveyor serve`` (built-in examples) from the source tree at ``root``, pinned;
    ``transport``: its --grpc-transport (None: the tree's default, for trees without one)."""
    http, grpc_port, metrics = free_port(), free_port(), free_port()
    command = [
        sys.executable, "-m", "conveyor", "serve", "--host", "127.0.0.1",
        "--http-port", str(http), "--grpc-port", str(grpc_port), "--metrics-port", str(metrics),
    ]  # fmt: skip
    if transport is not None:
        command += ["--grpc-transport", transport]
    # The tree first; whatever else the caller's PYTHONPATH holds after it.
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    with pinned(cpus), tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=log)
        try:
            wait_ready(f"http://127.0.0.1:{http}", 60, process)
            yield f"http://127.0.0.1:{http}", f"grpc://127.0.0.1:{grpc_port}"
        finally:
            process.terminate()
            process.wait(30)


@contextlib.contextmanager
def source_tree(ref: str | None) -> Iterator[Path]:
    """This checkout, or commit ``ref`` of it extracted into a temporary folder."""
    if ref is None:
        yield common.ROOT
        return
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(common.ROOT), "archive", ref], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def measure_served(
    root: Path,
    label: str,
    duration: float,
    warmup: float,
    cpus: tuple[set[int] | None, ...],
    grpc_transport: str | None = None,
    http: bool = True,
) -> dict[str, Report]:
    """Every scenario (the HTTP one only if ``http``) against one server of ``root``."""
    server_cpus, generator_cpus = cpus
    reports = {}
    with (
        serve_tree(root, server_cpus, grpc_transport) as (http_url, grpc_url),
        pinned(generator_cpus),
    ):
        for name, model, transport, concurrency in SCENARIOS:
            if transport == "http" and not http:
                continue
            print(f"== {label}: {name}", file=sys.stderr)
            url = http_url if transport == "http" else grpc_url
            spec = TargetSpec(url, model, streaming=transport == "grpc-stream")
            shapes = IDENTITY_SHAPE if model == "identity" else {}
            point = Point(concurrency=concurrency, warmup_s=warmup, duration_s=duration)
            reports[name] = run_bench(
                BenchSpec(spec, shapes=shapes, label=f"{label} {name}"),
                [point],
                progress=False,
                command="python -m benchmarks.large_tensors",
            )
    return reports


def table(
    after: dict[str, dict[str, Report]],
    before: dict[str, Report] | None,
    inprocess: dict[str, Report],
    baseline: str | None,
) -> str:
    """One row per scenario; a column per gRPC transport (``after``: transport -> reports)."""
    transports = list(after)
    head = ["scenario", "c"]
    for transport in transports:
        head += [f"infer/s ({transport})", f"p50 ms ({transport})"]
    head += ["in-process infer/s", "served / in-process"]
    if before is not None:
        head += [f"infer/s at {baseline}", "after / before"]
    head.append("target")
    rows: list[Sequence[str]] = [head]
    for name, _model, _transport, concurrency in SCENARIOS:
        engine = inprocess[_model].points[0].infer_per_s
        row = [name, str(concurrency)]
        first = 0.0
        for transport in transports:
            report = after[transport].get(name) or after[transports[0]].get(name)
            if report is None or (_transport == "http" and transport != transports[0]):
                row += ["=", "="]  # HTTP does not depend on the gRPC transport
                continue
            point = report.points[0]
            first = first or point.infer_per_s
            row += [
                rate(point.infer_per_s) + (f" ({point.errors} errors)" if point.errors else ""),
                ms(point.latency_ms["p50"]),
            ]
        row += [rate(engine), f"{first / engine:.2f}" if engine else "-"]
        if before is not None:
            old = before[name].points[0].infer_per_s
            row += [rate(old), f"{first / old:.2f}" if old else "-"]
        row.append(f"≥ {TARGETS[name]:,}")
        rows.append(row)
    return markdown(rows, align_left=1)


def ceiling_table(reports: Sequence[Report]) -> str:
    rows: list[Sequence[str]] = [["no-op server (canned answer)", "c", "infer/s", "p50 ms"]]
    for report in reports:
        for p in report.points:
            rows.append([report.label, p.x_label, rate(p.infer_per_s), ms(p.latency_ms["p50"])])
    return markdown(rows, align_left=1)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=3.0, help="measured seconds per point")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--baseline", metavar="GIT_REF", help="also measure this commit's server")
    p.add_argument("--no-ceiling", action="store_true", help="skip conveyor bench ceiling")
    p.add_argument(
        "--grpc-transports",
        default=",".join(TRANSPORTS),
        help="gRPC transports to serve with, a column each (default %(default)s)",
    )
    p.add_argument("--out", default=str(common.ROOT / "benchmarks" / "results"))
    args = p.parse_args(argv)
    cpus = pin_plan()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    inprocess = {
        model: common.run_inprocess(
            model,
            [concurrency],
            duration=args.duration,
            warmup=args.warmup,
            cpus=cpus[0],
            shapes=IDENTITY_SHAPE if model == "identity" else {},
        )
        for model, concurrency in (("identity", 4), ("tiny", 16))
    }
    transports = [t for t in args.grpc_transports.split(",") if t]
    after = {
        transport: measure_served(
            common.ROOT,
            f"this tree ({transport})",
            args.duration,
            args.warmup,
            cpus,
            transport,
            http=index == 0,
        )
        for index, transport in enumerate(transports)
    }
    before = None
    if args.baseline:
        with source_tree(args.baseline) as root:
            before = measure_served(root, args.baseline, args.duration, args.warmup, cpus)
    ceiling: list[Report] = []
    if not args.no_ceiling:
        print("== conveyor bench ceiling", file=sys.stderr)
        ceiling = measure_ceiling(args.duration, (16,), (1,), progress=False)
        ceiling += grpc_ceiling.measure(args.duration, 16, cpus)
    command = "python -m benchmarks.large_tensors " + shlex.join(
        list(argv if argv is not None else sys.argv[1:])
    )
    parts = [
        f"Measured {common.today()} on {common.machine_line()}; server and in-process runs "
        f"pinned to one core, generator to another; {args.duration:g} s per point after "
        f"{args.warmup:g} s warm-up. Command: `{command.strip()}`.",
        "",
        table(after, before, inprocess, args.baseline),
        "",
    ]
    if ceiling:
        parts += [ceiling_table(ceiling), ""]
    text = "\n".join(parts)
    (out / "large_tensors.md").write_text(text)
    everything = {
        "this tree": {
            transport: {k: r.to_dict() for k, r in reports.items()}
            for transport, reports in after.items()
        },
        "baseline": {k: r.to_dict() for k, r in (before or {}).items()},
        "inprocess": {k: r.to_dict() for k, r in inprocess.items()},
        "ceiling": [r.to_dict() for r in ceiling],
    }
    (out / "large_tensors.json").write_text(json.dumps(everything, indent=1))
    print(text)
    print(f"({time.monotonic() - started:.0f} s; written to {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
