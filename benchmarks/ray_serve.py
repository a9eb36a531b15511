"""What the Ray Serve path costs per request, and what a second replica buys.

    python -m benchmarks.ray_serve [--quick]

One temporary repository, served twice: by ``conveyor serve`` (one process) and on a local
Ray cluster (``conveyor.ray.build_app``: the V2 ingress, a deployment per model). The same
client, ``conveyor bench`` over HTTP with binary tensors, drives both:

- ``tiny`` (ONNX, +1 over 16 floats: almost no compute) at concurrency 1 and 16: the gap
  between the two servers is the Ray path's per-request overhead (proxy -> ingress
  replica -> model replica and back, each hop a pickled message between processes).
- ``wait1`` and ``wait2``: the same Python model (each call waits 20 ms, one instance per
  replica: a fixed per-call cost that uses no CPU, like a remote call or an accelerator),
  deployed with 1 and with 2 replicas, at concurrency 16. Waiting, not computing, so the
  second replica's gain shows Ray Serve's routing across replicas even on a 2-core
  machine; a CPU-bound model gains only with the cores a second node brings.

Writes benchmarks/results/ray_serve.json and ray_serve.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

from benchmarks import common
from benchmarks.common import RESULTS, markdown, ms, rate
from conveyor.bench import Report, read_json
from conveyor.examples import onnx_models

WAIT_MODEL = textwrap.dedent(
    """
    import time

    class Model:
        def infer(self, inputs):
            time.sleep(0.02)  # a fixed cost per call that uses no CPU
            return {"OUTPUT0": inputs["INPUT0"]}
    """
)
WAIT_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [16]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [16]

[ray]
num_cpus = 0.25
min_replicas = {replicas}
max_ongoing_requests = 16
"""
TINY_CONFIG = """
[onnxruntime]
intra_op_threads = 1

[ray]
num_cpus = 0.25
max_ongoing_requests = 64
"""


def build_repository(root: Path) -> None:
    onnx_models.tiny(root / "tiny" / "1" / "model.onnx")
    (root / "tiny" / "config.toml").write_text(TINY_CONFIG)
    for replicas in (1, 2):
        folder = root / f"wait{replicas}"
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "model.py").write_text(WAIT_MODEL)
        (folder / "config.toml").write_text(WAIT_CONFIG.format(replicas=replicas))


def bench(url: str, model: str, concurrency: str, duration: float, warmup: float, label: str):
    """``conveyor bench`` over HTTP in a child process: the one client for both servers."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        command = [
            sys.executable, "-m", "conveyor", "bench", model, "--url", url,
            "-c", concurrency, "-d", str(duration), "--warmup", str(warmup),
            "-q", "--json", str(out), "--label", label,
        ]  # fmt: skip
        done = subprocess.run(
            command, env=common.child_env(), capture_output=True, text=True, timeout=300
        )
        if not out.exists():
            raise RuntimeError(f"bench failed:\n{done.stdout}\n{done.stderr}")
        return read_json(out)


def on_ray(repository: Path, run: object) -> list[Report]:
    """Deploy ``repository`` on a local 2-CPU Ray cluster; ``run(url)`` the benchmarks."""
    import ray
    from ray import serve

    from conveyor.ray import APP_NAME, build_app

    port = common.free_port()
    os.environ["PYTHONPATH"] = common.child_env()["PYTHONPATH"]  # for Ray's workers
    ray.init(
        num_cpus=2, include_dashboard=False, address="local", log_to_driver=False,
        configure_logging=False,
    )  # fmt: skip
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(build_app(repository, ingress_cpus=0.25), name=APP_NAME, route_prefix="/")
        return run(f"http://127.0.0.1:{port}")  # type: ignore[operator, no-any-return]
    finally:
        serve.shutdown()
        ray.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1 s points: a smoke test")
    p.add_argument("--duration", type=float)
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    duration = args.duration or (1.0 if args.quick else 5.0)
    warmup = 0.5 if args.quick else 1.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def run_all(url: str, server: str) -> list[Report]:
        reports = [bench(url, "tiny", "1,16", duration, warmup, f"tiny {server}")]
        if server == "ray":
            for replicas in (1, 2):
                label = f"wait {server} {replicas} replica{'s' * (replicas > 1)}"
                reports.append(bench(url, f"wait{replicas}", "16", duration, warmup, label))
        return reports

    with tempfile.TemporaryDirectory() as tmp:
        repository = Path(tmp) / "models"
        build_repository(repository)
        print("== conveyor serve", file=sys.stderr)
        with common.serve(None, repository=str(repository)) as (http_url, _grpc):
            reports = run_all(http_url, "serve")
        print("== ray serve", file=sys.stderr)
        reports += on_ray(repository, lambda url: run_all(url, "ray"))

    rows = [("target", "c", "infer/s", "p50 ms", "p99 ms", "errors")]
    for report in reports:
        for pt in report.points:
            rows.append(
                (
                    report.label,
                    str(pt.concurrency),
                    rate(pt.infer_per_s),
                    ms(pt.latency_ms["p50"]),
                    ms(pt.latency_ms["p99"]),
                    str(pt.errors),
                )
            )
    (out / "ray_serve.json").write_text(json.dumps([r.to_dict() for r in reports], indent=1))
    text = (
        f"Measured {common.today()} on {common.machine_line()}; not pinned (Ray runs its own "
        f"processes); HTTP, binary tensors, closed loop, {duration:g} s per point after "
        f"{warmup:g} s warm-up. Command: `python -m benchmarks.ray_serve"
        f"{' --quick' if args.quick else ''}`.\n\n{markdown(rows, align_left=1)}\n"
    )
    (out / "ray_serve.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
