"""Front-end processes (``conveyor serve --workers N``): what one costs, what N buy.

For each front-end count, serves the tiny ONNX model (FP32 [1, 16] + 1, so the front end's
work dominates) and measures, with tritonclient over HTTP (binary tensors):

- latency at concurrency 1 (p50, p90): the round trip to the engine process is what
  ``--workers 2`` adds to every request over ``--workers 1`` (which has no such hop);
- throughput at ``--concurrency`` for ``--duration`` s, and the server's CPU-seconds in that
  window (the engine process plus every front-end process, user + system), so
  ``infer/s per server CPU-s``: flat from 1 to 2 front ends means the hop costs little;
- memory after the run: RSS and PSS (proportional: shared pages split) of each process.

    python -m benchmarks.frontends                      # 1 and 2 front ends, table
    python -m benchmarks.frontends --quick              # smoke test (2 s windows)
    python -m benchmarks.frontends --workers 1,2,4 --concurrency 16

Results go to benchmarks/results/frontends.json. On a loaded machine the load generator
(Python threads) competes with the server for cores: compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.common import RESULTS, machine_line, markdown
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder


def server_processes(server: RunningServer) -> list[psutil.Process]:
    main = psutil.Process(server.process.pid)
    return [main, *main.children(recursive=True)]


def cpu_seconds(processes: list[psutil.Process]) -> list[float]:
    """Each process's CPU-seconds so far (user + system); 0 for one that is gone."""
    seconds = []
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            seconds.append(0.0)
            continue
        seconds.append(times.user + times.system)
    return seconds


def memory(processes: list[psutil.Process]) -> list[dict[str, Any]]:
    rows = []
    for process in processes:
        try:
            info = process.memory_full_info()
            command = " ".join(process.cmdline()[1:4])
        except psutil.Error:
            continue
        role = "front end" if "workers.process" in command else "engine / server"
        rows.append({"pid": process.pid, "role": role, "rss_mb": info.rss / 2**20,
                     "pss_mb": info.pss / 2**20})  # fmt: skip
    return rows


def make_client(server: RunningServer) -> Any:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 16), np.float32), binary_data=True)
    output = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
    return lambda: client.infer("tiny", [tensor], outputs=[output])


def latency(server: RunningServer, requests: int) -> list[float]:
    infer = make_client(server)
    for _ in range(50):
        infer()
    seconds = []
    for _ in range(requests):
        started = time.perf_counter()
        infer()
        seconds.append(time.perf_counter() - started)
    return seconds


def throughput(server: RunningServer, concurrency: int, duration: float) -> tuple[int, list[float]]:
    """(requests answered, each server process's CPU-seconds (the engine process first))
    in one window of closed-loop load."""
    stop = threading.Event()
    counts = [0] * concurrency
    start = threading.Barrier(concurrency + 1)

    def run(slot: int) -> None:
        infer = make_client(server)
        infer()
        start.wait()
        while not stop.is_set():
            infer()
            counts[slot] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    processes = server_processes(server)
    start.wait()
    cpu_before = cpu_seconds(processes)
    time.sleep(duration)
    cpu_after = cpu_seconds(processes)
    stop.set()
    answered = sum(counts)
    for thread in threads:
        thread.join()
    return answered, [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]


def measure(workers: int, args: argparse.Namespace, repository: Path) -> dict[str, Any]:
    extra = ["--workers", str(workers), "--log-level", "warning"]
    with run_server(repository, extra_args=extra) as server:
        if workers > 1:
            time.sleep(2)  # every front end listening (they start beside the engine)
        seconds = sorted(latency(server, args.latency_requests))
        answered, per_process = throughput(server, args.concurrency, args.duration)
        cpu = sum(per_process)
        return {
            "workers": workers,
            "p50_ms": 1000 * seconds[len(seconds) // 2],
            "p90_ms": 1000 * seconds[int(len(seconds) * 0.9)],
            "infer_per_s": answered / args.duration,
            "server_cpu_per_s": cpu / args.duration,
            "infer_per_cpu_s": answered / cpu if cpu else 0.0,
            # CPU microseconds per request in the engine process (and, with front-end
            # processes, in each of those): what limits how far front ends scale.
            "engine_cpu_us": 1e6 * per_process[0] / answered if answered else 0.0,
            "front_end_cpu_us": [1e6 * c / answered for c in per_process[1:]] if answered else [],
            "memory": memory(server_processes(server)),
        }


def table(results: list[dict[str, Any]]) -> str:
    rows = [["front ends", "p50 ms (c=1)", "p90 ms", "infer/s", "server CPU-s/s",
             "infer per CPU-s", "engine process CPU us/req", "front ends CPU us/req",
             "RSS MB (each)", "PSS MB (sum)"]]  # fmt: skip
    for r in results:
        rss = " + ".join(f"{m['rss_mb']:.0f}" for m in r["memory"])
        pss = sum(m["pss_mb"] for m in r["memory"])
        rows.append([str(r["workers"]), f"{r['p50_ms']:.2f}", f"{r['p90_ms']:.2f}",
                     f"{r['infer_per_s']:,.0f}", f"{r['server_cpu_per_s']:.2f}",
                     f"{r['infer_per_cpu_s']:,.0f}", f"{r['engine_cpu_us']:.0f}",
                     f"{sum(r['front_end_cpu_us']):.0f}" if r["front_end_cpu_us"] else "-",
                     rss, f"{pss:.0f}"])  # fmt: skip
    return markdown(rows, align_left=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2", help="front-end counts, comma-separated")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per window")
    parser.add_argument("--latency-requests", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="smoke test: short windows")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.latency_requests = 2.0, 100
    with tempfile.TemporaryDirectory() as folder:
        RepoBuilder(Path(folder)).tiny()
        results = [measure(int(n), args, Path(folder)) for n in args.workers.split(",")]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "frontends.json"
    out.write_text(json.dumps({"machine": machine_line(), "results": results}, indent=2))
    print(machine_line())
    print(table(results))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
