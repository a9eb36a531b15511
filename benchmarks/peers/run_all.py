"""Conveyor beside MLServer and KServe's ModelServer: one run, one generator, the ratios
docs/benchmarks.md reports.

    python -m benchmarks.peers.run_all [--rounds 2] [--duration 5] [--models tiny]
        [--mlserver-python PATH] [--kserve-python PATH]

Each round serves the same ONNX models (``conveyor.examples.onnx_models``; onnxruntime, one
intra-op thread, one process) from each server in turn, pinned to core 0, and drives it from
core 1 with ``conveyor bench``'s generator, closed loop at ``--concurrency`` (16), batch 1:

- Conveyor (``conveyor serve``, its default gRPC transport): HTTP binary, HTTP JSON, gRPC;
- MLServer 1.7.1 (``run_mlserver``; no binary tensor extension): HTTP JSON, gRPC;
- KServe 0.21 ``ModelServer`` (``run_kserve``): HTTP binary, HTTP JSON, gRPC;
- Conveyor's engine in-process on core 0 (``conveyor bench --url inprocess``): the limit.

Each server's CPU-seconds over its points are read (``server core``: 1.00 = core 0 was the
server's the whole time; below that another program or the generator was the limit). Then
per round the ratios: Conveyor HTTP binary and gRPC / in-process, JSON / binary, Conveyor /
best peer per protocol. Environments: MLServer's and KServe's are made once under
benchmarks/peers/ unless ``--mlserver-python`` / ``--kserve-python`` name an interpreter
(see run_kserve.py for how to make one by hand). Writes benchmarks/results/peers_all.md and
.json, and prints them. Not part of the test suite: it installs other servers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

from benchmarks import common
from benchmarks.common import (
    IDENTITY_SHAPE,
    RESULTS,
    markdown,
    ms,
    pin_plan,
    pinned,
    rate,
    run_inprocess,
    serve,
)
from benchmarks.peers import run_kserve, run_mlserver
from conveyor.bench import BenchSpec, Point, TargetSpec, run_bench

TRANSPORTS = {
    "conveyor": ("http-binary", "http-json", "grpc"),
    "mlserver": ("http-json", "grpc"),
    "kserve": ("http-binary", "http-json", "grpc"),
}
NAMES = {"conveyor": "Conveyor", "mlserver": "MLServer", "kserve": "KServe ModelServer"}
COMMAND = "python -m benchmarks.peers.run_all"


def listener_processes(http_url: str) -> list[psutil.Process]:
    """The process listening on the URL's port and its children: the whole server."""
    port = int(http_url.rsplit(":", 1)[1])
    for connection in psutil.net_connections("tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port:
            if connection.pid is None:
                break
            main = psutil.Process(connection.pid)
            return [main, *main.children(recursive=True)]
    raise RuntimeError(f"no process listens on {http_url}")


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def measure(
    server: str,
    urls: tuple[str, str],
    models: Sequence[str],
    points: Sequence[Point],
    cpus: set[int] | None,
) -> list[dict[str, Any]]:
    """One row per (model, transport, point), with the server's CPU over the point."""
    http_url, grpc_url = urls
    processes = listener_processes(http_url)
    rows = []
    with pinned(cpus):
        for model in models:
            shapes = IDENTITY_SHAPE if model == "identity" else {}
            for transport in TRANSPORTS[server]:
                print(f"== {server} {model} {transport}", file=sys.stderr)
                spec = (
                    TargetSpec(grpc_url, model)
                    if transport == "grpc"
                    else TargetSpec(http_url, model, encoding=transport.removeprefix("http-"))
                )
                for point in points:
                    before, started = cpu_seconds(processes), os.times().elapsed
                    report = run_bench(
                        BenchSpec(spec, shapes=shapes, label=f"{server} {transport} {model}"),
                        [point],
                        command=COMMAND,
                    )
                    busy = (cpu_seconds(processes) - before) / (os.times().elapsed - started)
                    measured = dict(report.points[0].__dict__)
                    # PointResult's own "server" is the server's statistics split.
                    measured["split"] = measured.pop("server")
                    rows.append(
                        {
                            **measured,
                            "server": server,
                            "model": model,
                            "transport": transport,
                            "server_core": busy,
                        }
                    )
    return rows


def one_round(
    args: argparse.Namespace,
    pythons: dict[str, Path],
    log: Path,
    points: Sequence[Point],
) -> dict[str, Any]:
    server_cpus, generator_cpus = pin_plan()
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    starters: dict[str, Callable[[], contextlib.AbstractContextManager[tuple[str, str]]]] = {
        "conveyor": lambda: serve(server_cpus),
        "mlserver": lambda: run_mlserver.mlserver(pythons["mlserver"], server_cpus, log),
        "kserve": lambda: run_kserve.kserve_server(
            pythons["kserve"], server_cpus, log, args.models
        ),
    }
    for server in args.servers:
        with starters[server]() as urls:
            rows += measure(server, urls, args.models, points, generator_cpus)
    inprocess = {}
    for model in args.models:
        print(f"== conveyor {model} in-process", file=sys.stderr)
        report = run_inprocess(
            model,
            [p.concurrency for p in points if p.concurrency],
            duration=args.duration,
            warmup=args.warmup,
            cpus=server_cpus,
            shapes=IDENTITY_SHAPE if model == "identity" else None,
        )
        inprocess[model] = [p.__dict__ for p in report.points]
    return {"load_before": load_before, "load_after": os.getloadavg()[0], "rows": rows,
            "inprocess": inprocess}  # fmt: skip


def find(rows: list[dict[str, Any]], server: str, model: str, transport: str, c: int) -> Any:
    for row in rows:
        if (row["server"], row["model"], row["transport"], row["concurrency"]) == (
            server, model, transport, c):  # fmt: skip
            return row
    return None


def round_table(result: dict[str, Any], models: Sequence[str], concurrency: Sequence[int]) -> str:
    head = ["model", "c", "server", "transport", "infer/s", "p50 ms", "p99 ms", "errors",
            "gen cpu", "server core", "server CPU µs/req"]  # fmt: skip
    rows: list[list[str]] = [head]
    for model in models:
        for c in concurrency:
            for row in result["rows"]:
                if row["model"] != model or row["concurrency"] != c:
                    continue
                per_request = (
                    f"{1e6 * row['server_core'] / row['infer_per_s']:.0f}"
                    if row["infer_per_s"]
                    else "-"
                )
                rows.append([model, str(c), NAMES[row["server"]], row["transport"],
                             rate(row["infer_per_s"]), ms(row["latency_ms"].get("p50")),
                             ms(row["latency_ms"].get("p99")), str(row["errors"]),
                             f"{row['generator_cpu']:.2f}", f"{row['server_core']:.2f}",
                             per_request])  # fmt: skip
            for point in result["inprocess"].get(model, []):
                if point["concurrency"] == c:
                    rows.append([model, str(c), "Conveyor engine", "in-process",
                                 rate(point["infer_per_s"]), ms(point["latency_ms"].get("p50")),
                                 ms(point["latency_ms"].get("p99")), str(point["errors"]),
                                 f"{point['generator_cpu']:.2f}", "-", "-"])  # fmt: skip
    return markdown(rows, align_left=4)


def ratios(result: dict[str, Any], model: str, c: int) -> list[tuple[str, str, str, str]]:
    """(ratio, by infer/s, by infer per server CPU-second, target) for the targets
    docs/benchmarks.md sets, from one round. Per CPU-second holds where the server did not
    get its whole core (a shared machine); in-process, the CPU is the whole process's
    (engine and generator)."""

    def per_s(row: dict[str, Any]) -> float:
        return float(row["infer_per_s"])

    def per_cpu(row: dict[str, Any]) -> float:
        busy = row.get("server_core", row.get("generator_cpu"))
        return float(row["infer_per_s"]) / busy if busy else 0.0

    inproc = next((p for p in result["inprocess"].get(model, []) if p["concurrency"] == c), None)

    def cells(key: Any) -> list[str]:
        def speed(server: str, transport: str) -> float | None:
            row = find(result["rows"], server, model, transport, c)
            return key(row) if row and not row["errors"] else None

        def share(a: float | None, b: float | None, as_times: bool = False) -> str:
            if not a or not b:
                return "-"
            return f"{a / b:.1f}x" if as_times else f"{100 * a / b:.0f}%"

        engine = None
        if inproc is not None:
            engine = key({**inproc, "server_core": inproc["generator_cpu"]})
        binary, json_, grpc = (speed("conveyor", t) for t in ("http-binary", "http-json", "grpc"))
        peers_http = [s for p in ("mlserver", "kserve") for t in ("http-binary", "http-json")
                      if (s := speed(p, t)) is not None]  # fmt: skip
        peers_grpc = [s for p in ("mlserver", "kserve") if (s := speed(p, "grpc")) is not None]
        best_ours = max(filter(None, (binary, json_)), default=None)
        return [
            share(binary, engine),
            share(grpc, engine),
            share(json_, binary),
            share(best_ours, max(peers_http, default=None), True),
            share(grpc, max(peers_grpc, default=None), True),
        ]

    names = ["HTTP binary / in-process", "gRPC / in-process", "HTTP JSON / HTTP binary",
             "HTTP (best of binary, JSON) / best peer HTTP", "gRPC / best peer gRPC"]  # fmt: skip
    targets = ["≥ 50%", "≥ 50%", "≥ 70%", "≥ 4x", "≥ 5x"]
    return list(zip(names, cells(per_s), cells(per_cpu), targets, strict=True))


def render(versions: dict[str, str], results: list[dict[str, Any]], args: Any) -> str:
    lines = [
        f"Measured {common.today()} on {common.machine_line()}. Each server pinned to core 0 in "
        f"turn, the generator on core 1; closed loop, batch 1, {args.duration:g} s per point "
        f"after {args.warmup:g} s; "
        + ", ".join(f"{NAMES[n]} {v}" for n, v in versions.items())
        + f". Command: `{COMMAND} --rounds {args.rounds}`.",
    ]
    concurrency = [int(c) for c in str(args.concurrency).split(",")]
    for i, result in enumerate(results, 1):
        lines += ["", f"Round {i} (load average {result['load_before']:.1f} before, "
                  f"{result['load_after']:.1f} after):", "",
                  round_table(result, args.models, concurrency), ""]  # fmt: skip
        for model in args.models:
            for c in concurrency:
                head = ("ratio", "by infer/s", "by infer per server CPU-s", "target")
                rows = [head, *ratios(result, model, c)]
                lines += [f"{model}, c={c}:", "", markdown(rows, align_left=1), ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per point")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--concurrency", default="16")
    p.add_argument("--models", default="tiny", help="comma list of tiny, mlp, identity")
    p.add_argument("--servers", default="conveyor,mlserver,kserve")
    p.add_argument("--mlserver-python", type=Path, help="MLServer's environment's interpreter")
    p.add_argument("--kserve-python", type=Path, help="KServe's environment's interpreter")
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.servers = [s for s in args.servers.split(",") if s]
    for name in args.servers:
        if name not in TRANSPORTS:
            p.error(f"--servers takes {', '.join(TRANSPORTS)}, not {name!r}")
    concurrency = [int(c) for c in args.concurrency.split(",")]
    points = [Point(concurrency=c, warmup_s=args.warmup, duration_s=args.duration)
              for c in concurrency]  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "peers_all.log"
    pythons: dict[str, Path] = {}
    if "mlserver" in args.servers:
        pythons["mlserver"] = args.mlserver_python or run_mlserver.ensure_venv(log)
    if "kserve" in args.servers:
        pythons["kserve"] = args.kserve_python or run_kserve.ensure_venv(log)
    versions = {name: run_kserve.version(python, name) for name, python in pythons.items()}
    results = [one_round(args, pythons, log, points) for _ in range(args.rounds)]
    text = render(versions, results, args)
    (out / "peers_all.md").write_text(text)
    (out / "peers_all.json").write_text(
        json.dumps({"versions": versions, "rounds": results}, indent=1, default=str)
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
