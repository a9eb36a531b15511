"""Throughput of a CPU-bound pure-Python model on thread vs process instances.

The model is a Python loop that holds the GIL for its whole run (~10 ms), the case threads
cannot scale. Each configuration is served in-process by an Engine (a fresh one each) and
driven closed-loop by 2 x instances + 1 client threads that each submit, wait, repeat.
Prints a table and writes a bar chart (matplotlib, Agg).

    PYTHONPATH=. python bench/process_scaling.py                       # table + plot
    PYTHONPATH=. python bench/process_scaling.py --seconds 1 --json    # what the test runs
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np

from conveyor import Engine

MODEL = textwrap.dedent(
    """
    import numpy as np


    class Model:
        def infer(self, inputs):
            total = 0
            for i in range(int(inputs["INPUT0"][0])):  # pure Python: holds the GIL throughout
                total += i * i % 7
            return {"OUTPUT0": np.array([total], np.int64)}
    """
)

CONFIG = """
backend = "python"
instances = {instances}
instance_kind = "{kind}"

[[inputs]]
name = "INPUT0"
datatype = "INT64"
shape = [1]

[[outputs]]
name = "OUTPUT0"
datatype = "INT64"
shape = [1]
"""

CONFIGS = [("thread", 1), ("thread", 2), ("process", 1), ("process", 2)]


def loop_count(target_ms: float) -> int:
    """Iterations of the model's loop that take about ``target_ms`` here."""
    n = 200_000
    start = time.perf_counter()
    total = 0
    for i in range(n):
        total += i * i % 7
    per_iteration = (time.perf_counter() - start) / n
    return max(1000, int(target_ms / 1000 / per_iteration))


def run(kind: str, instances: int, n: int, seconds: float, root: Path) -> dict[str, float]:
    repo = root / f"{kind}-{instances}"
    (repo / "spin" / "1").mkdir(parents=True)
    (repo / "spin" / "1" / "model.py").write_text(MODEL)
    (repo / "spin" / "config.toml").write_text(CONFIG.format(kind=kind, instances=instances))
    x = {"INPUT0": np.array([n], np.int64)}
    with Engine.from_repository(repo) as engine:
        for _ in range(2 * instances):  # warm up every instance
            engine.submit("spin", x).result(60)
        stop = threading.Event()
        counts: list[int] = []
        lock = threading.Lock()

        def client() -> None:
            done = 0
            while not stop.is_set():
                engine.submit("spin", x).result(60)
                done += 1
            with lock:
                counts.append(done)

        clients = [threading.Thread(target=client) for _ in range(2 * instances + 1)]
        before = engine.statistics("spin")[0].success.count
        started = time.perf_counter()
        for thread in clients:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in clients:
            thread.join(60)
        elapsed = time.perf_counter() - started
        completed = engine.statistics("spin")[0].success.count - before
    return {"kind": kind, "instances": instances, "rps": completed / elapsed}


def plot(results: list[dict[str, float]], path: Path, model_ms: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['kind']} x{r['instances']}" for r in results]
    rps = [r["rps"] for r in results]
    colours = ["#8c8c8c" if r["kind"] == "thread" else "#1f77b4" for r in results]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    bars = ax.bar(labels, rps, color=colours)
    for bar, r in zip(bars, results, strict=True):
        ax.annotate(
            f"{r['speedup']:.2f}x",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
        )
    ax.set_ylabel("requests / s")
    ax.set_title(f"pure-Python model (~{model_ms:.0f} ms, holds the GIL), {os.cpu_count()} cores")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per configuration")
    parser.add_argument("--model-ms", type=float, default=10.0, help="model run time")
    parser.add_argument("--plot", type=Path, default=Path("bench/results/process_scaling.png"))
    parser.add_argument("--json", action="store_true", help="print JSON, no table or plot")
    args = parser.parse_args()
    n = loop_count(args.model_ms)
    results: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, instances in CONFIGS:
            results.append(run(kind, instances, n, args.seconds, Path(tmp)))
    for r in results:
        one = next(o for o in results if o["kind"] == r["kind"] and o["instances"] == 1)
        r["speedup"] = r["rps"] / one["rps"]
    if args.json:
        print(json.dumps({"cores": os.cpu_count(), "loop": n, "results": results}))
        return
    print(
        f"pure-Python model, ~{args.model_ms:g} ms a request ({n} loop iterations), "
        f"{os.cpu_count()} cores, {args.seconds:g} s per configuration"
    )
    print(f"{'instances':<12} {'req/s':>8} {'vs x1':>7}")
    for r in results:
        print(f"{r['kind']} x{r['instances']:<4} {r['rps']:>8.1f} {r['speedup']:>6.2f}x")
    plot(results, args.plot, args.model_ms)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
