"""Conveyor beside Seldon MLServer 1.7.1, same ONNX models, same generator, same run.

    python -m benchmarks.peers.run_mlserver [--quick]

1. Creates MLServer's own virtual environment (benchmarks/peers/.venv-mlserver, once) with
   ``python -m venv`` and installs mlserver==1.7.1, uvloop==0.21.0 (with uvloop 0.22+ its
   workers die at start while ``mlserver start`` exits 0) and onnxruntime. MLServer cannot
   share Conveyor's environment: its protobuf module and tritonclient's clash.
2. Writes an MLServer repository in a temporary folder: ``tiny``, ``mlp`` and ``identity``
   built by Conveyor's own ``onnx_models``, each served by ``onnx_runtime.OnnxRuntime`` (the
   file beside this one) with one intra-op thread; ``parallel_workers: 0`` (its fastest
   setting on one core).
3. Starts MLServer pinned to core 0, drives it from core 1 with ``conveyor bench``'s
   generator (plain JSON over HTTP: MLServer has no binary tensor extension; and gRPC),
   stops it; then does the same with ``conveyor serve`` (HTTP binary, HTTP JSON, gRPC).
4. Writes benchmarks/results/peers.md (one table with both) and peers.json, and prints the table.

Not part of the test suite: it installs a second server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks import common
from benchmarks.common import (
    IDENTITY_SHAPE,
    RESULTS,
    free_port,
    markdown,
    ms,
    pin_plan,
    pinned,
    rate,
    serve,
)
from conveyor.bench import BenchSpec, Point, Report, TargetSpec, run_bench
from conveyor.examples import onnx_models

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-mlserver"
PACKAGES = ["mlserver==1.7.1", "uvloop==0.21.0", "onnxruntime"]
MODELS = {
    "tiny": (onnx_models.tiny, [("INPUT0", "FP32", [-1, 16])], [("OUTPUT0", "FP32", [-1, 16])]),
    "mlp": (onnx_models.mlp, [("INPUT0", "FP32", [-1, 256])], [("OUTPUT0", "FP32", [-1, 16])]),
    "identity": (onnx_models.identity, [("INPUT0", "FP32", [-1])], [("OUTPUT0", "FP32", [-1])]),
}


def ensure_venv(log: Path) -> Path:
    """MLServer's environment; created and filled once, reused after that."""
    python = VENV / "bin" / "python"
    marker = VENV / ".installed"
    wanted = " ".join(PACKAGES)
    if marker.exists() and marker.read_text() == wanted:
        return python
    print(f"creating {VENV} and installing {wanted} (once; a few minutes)", file=sys.stderr)
    if VENV.exists():
        shutil.rmtree(VENV)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    with log.open("ab") as out:
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        subprocess.run(
            [str(python), "-m", "pip", "install", *PACKAGES],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    marker.write_text(wanted)
    return python


def write_repository(root: Path, http_port: int, grpc_port: int, metrics_port: int) -> None:
    (root / "settings.json").write_text(
        json.dumps(
            {
                "host": "127.0.0.1",
                "http_port": http_port,
                "grpc_port": grpc_port,
                "metrics_port": metrics_port,
                "parallel_workers": 0,
                "debug": False,
                # Its default gRPC limit (4 MiB) rejects the 4 MiB tensor plus its message header.
                "grpc_max_message_length": 64 * 1024 * 1024,
            }
        )
    )
    for name, (build, inputs, outputs) in MODELS.items():
        folder = root / name
        build(folder / "model.onnx")
        shutil.copy(HERE / "onnx_runtime.py", folder / "onnx_runtime.py")
        (folder / "model-settings.json").write_text(
            json.dumps(
                {
                    "name": name,
                    "implementation": "onnx_runtime.OnnxRuntime",
                    "parameters": {"uri": "./model.onnx"},
                    "inputs": [{"name": n, "datatype": d, "shape": s} for n, d, s in inputs],
                    "outputs": [{"name": n, "datatype": d, "shape": s} for n, d, s in outputs],
                }
            )
        )


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v2/health/ready", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def serving(
    process: subprocess.Popen[bytes], name: str, http_port: int, grpc_port: int, log: Path
) -> Iterator[tuple[str, str]]:
    """A peer server's (HTTP URL, gRPC URL) once it answers ready; stopped on exit."""
    http_url = f"http://127.0.0.1:{http_port}"
    try:
        deadline = time.monotonic() + 120
        while not _ready(http_url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not become ready; see {log}")
            time.sleep(0.2)
        yield http_url, f"grpc://127.0.0.1:{grpc_port}"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@contextlib.contextmanager
def mlserver(python: Path, cpus: set[int] | None, log: Path) -> Iterator[tuple[str, str]]:
    http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        write_repository(Path(tmp), http_port, grpc_port, metrics_port)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        with log.open("ab") as out, pinned(cpus):
            process = subprocess.Popen(
                [str(python.parent / "mlserver"), "start", tmp],
                cwd=tmp,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        with serving(process, "MLServer", http_port, grpc_port, log) as urls:
            yield urls


def measure(
    server: str,
    http_url: str,
    grpc_url: str,
    transports: Sequence[str],
    models: Sequence[str],
    points: Sequence[Point],
    cpus: set[int] | None,
) -> dict[tuple[str, str, str], Report]:
    reports = {}
    with pinned(cpus):
        for model in models:
            shapes = IDENTITY_SHAPE if model == "identity" else {}
            for transport in transports:
                print(f"== {server} {model} {transport}", file=sys.stderr)
                spec = (
                    TargetSpec(grpc_url, model)
                    if transport == "grpc"
                    else TargetSpec(http_url, model, encoding=transport.removeprefix("http-"))
                )
                reports[(server, model, transport)] = run_bench(
                    BenchSpec(spec, shapes=shapes, label=f"{server} {transport} {model}"),
                    points,
                    command="python -m benchmarks.peers.run_mlserver",
                )
    return reports


def table(reports: dict[tuple[str, str, str], Report], concurrency: Sequence[int]) -> str:
    rows = [
        (
            "model",
            "transport",
            "c",
            "Conveyor infer/s",
            "p50 ms",
            "p99 ms",
            "MLServer infer/s",
            "p50 ms",
            "p99 ms",
            "Conveyor / MLServer",
        )
    ]
    models = sorted({m for _s, m, _t in reports}, key=list(MODELS).index)
    for model in models:
        for transport in ("http-binary", "http-json", "grpc"):
            ours = reports.get(("conveyor", model, transport))
            theirs = reports.get(("mlserver", model, transport))
            if ours is None and theirs is None:
                continue
            for i, c in enumerate(concurrency):
                a = ours.points[i] if ours else None
                b = theirs.points[i] if theirs else None

                def cells(p):  # type: ignore[no-untyped-def]
                    if p is None:
                        return ["n/a", "", ""]
                    failed = p.errors - p.unfinished
                    note = "".join(
                        [
                            f" ({failed} errors)" if failed else "",
                            f" ({p.unfinished} unfinished)" if p.unfinished else "",
                        ]
                    )
                    return [
                        rate(p.infer_per_s) + note,
                        ms(p.latency_ms["p50"]),
                        ms(p.latency_ms["p99"]),
                    ]

                ratio = (
                    f"{a.infer_per_s / b.infer_per_s:.1f}x"
                    if a and b and b.infer_per_s > 0 and not b.errors
                    else "-"
                )
                rows.append((model, transport, str(c), *cells(a), *cells(b), ratio))
    return markdown(rows, align_left=3)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--duration", type=float)
    p.add_argument("--concurrency", default="1,16")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--conveyor-http-url", help="use this running Conveyor instead of starting one")
    p.add_argument("--conveyor-grpc-url")
    args = p.parse_args(argv)
    duration = args.duration or (1.0 if args.quick else 5.0)
    warmup = 0.3 if args.quick else 1.0
    concurrency = [int(c) for c in args.concurrency.split(",")]
    models = [m for m in args.models.split(",") if m]
    points = [Point(concurrency=c, warmup_s=warmup, duration_s=duration) for c in concurrency]
    server_cpus, generator_cpus = pin_plan()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "mlserver.log"
    python = ensure_venv(log)
    reports: dict[tuple[str, str, str], Report] = {}
    with mlserver(python, server_cpus, log) as (http_url, grpc_url):
        reports.update(
            measure(
                "mlserver",
                http_url,
                grpc_url,
                ("http-json", "grpc"),
                models,
                points,
                generator_cpus,
            )
        )
    with serve(server_cpus, args.conveyor_http_url, args.conveyor_grpc_url) as (http_url, grpc_url):
        reports.update(
            measure(
                "conveyor",
                http_url,
                grpc_url,
                ("http-binary", "http-json", "grpc"),
                models,
                points,
                generator_cpus,
            )
        )
    version = (
        subprocess.run(
            [str(python), "-m", "pip", "show", "mlserver"], capture_output=True, text=True
        )
        .stdout.split("Version: ")[-1]
        .split("\n")[0]
    )
    text = (
        f"Measured {common.today()} on {common.machine_line()}; each server pinned to core "
        f"0 in turn, the generator on core 1; MLServer {version} with parallel_workers 0 "
        f"and onnxruntime intra_op 1; closed loop, batch 1, {duration:g} s per point. "
        f"Command: `python -m benchmarks.peers.run_mlserver"
        f"{' --quick' if args.quick else ''}`. "
        f"MLServer has no binary tensor extension (n/a).\n\n"
        f"{table(reports, concurrency)}\n"
    )
    (out / "peers.md").write_text(text)
    (out / "peers.json").write_text(
        json.dumps(
            [
                {"server": s, "model": m, "transport": t, **r.to_dict()}
                for (s, m, t), r in reports.items()
            ],
            indent=1,
        )
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
