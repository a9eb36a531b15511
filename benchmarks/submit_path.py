"""What ``Engine.submit`` costs per request: ``tiny`` in-process, submit to answer.

    python -m benchmarks.submit_path [--quick] [--against DIR] [--rounds N] [--out DIR]

Two loads on one engine, no server and no load generator:

- ``serial``: one thread submits and waits for the result, one request at a time.
- ``closed 16``: 16 requests in flight, each answer's done-callback submitting the next one
  (on the instance thread that answered it), so no blocked threads and no GIL hand-offs
  between 16 waiters muddy the figure.

Each load reports wall µs per request and process CPU µs per request (every thread of the
process: the caller's, the instance thread's). ``tiny`` is one ONNX Add over FP32 [1, 16],
so what is left is the engine's own path: the future, the input checks, the queue, the
instance thread's wake-up, the statistics and the answer.

``--against DIR``: a second tree of the project (e.g. ``git archive`` of main unpacked in
``DIR``); the two trees are measured in turns, ``--rounds`` times each, every measurement a
fresh process with that tree first on ``PYTHONPATH``, so both see the same machine load.
Writes benchmarks/results/submit_path.json and submit_path.md. On a shared machine the
figures are noisy: compare the rows of one run, and read the spread over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
CONCURRENCY = 16


def _measure(requests: int) -> dict[str, float]:
    """In the child process: both loads on the tree first on sys.path."""
    import numpy as np

    import conveyor
    from conveyor import Engine

    inputs = {"INPUT0": np.ones((1, 16), np.float32)}
    results: dict[str, float] = {}
    with Engine.from_repository() as engine:
        for _ in range(2000):  # warm-up: code paths, allocator, onnxruntime's first runs
            engine.submit("tiny", inputs).result()

        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(requests):
            engine.submit("tiny", inputs).result()
        results["serial_wall_us"] = (time.perf_counter() - wall) / requests * 1e6
        results["serial_cpu_us"] = (time.process_time() - cpu) / requests * 1e6

        done = threading.Event()
        lock = threading.Lock()
        state = {"sent": 0, "answered": 0, "failed": 0}

        def send() -> None:
            engine.submit("tiny", inputs).add_done_callback(answered)

        def answered(future: object) -> None:
            with lock:
                state["answered"] += 1
                if future.exception() is not None:  # type: ignore[attr-defined]
                    state["failed"] += 1
                more = state["sent"] < requests
                if more:
                    state["sent"] += 1
                elif state["answered"] == requests:
                    done.set()
            if more:
                send()

        wall, cpu = time.perf_counter(), time.process_time()
        with lock:
            state["sent"] = CONCURRENCY
        for _ in range(CONCURRENCY):
            send()
        if not done.wait(120):
            raise RuntimeError(f"closed loop: only {state['answered']} of {requests} answered")
        results["closed16_wall_us"] = (time.perf_counter() - wall) / requests * 1e6
        results["closed16_cpu_us"] = (time.process_time() - cpu) / requests * 1e6
        results["closed16_failed"] = state["failed"]
    results["tree"] = str(Path(conveyor.__file__).resolve().parent.parent)  # type: ignore[assignment]
    return results


def _run_child(tree: Path, requests: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", "--requests", str(requests)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few requests, 1 round")
    parser.add_argument("--against", type=Path, help="another tree, measured in turns")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_measure(args.requests)))
        return
    requests, rounds = (2000, 1) if args.quick else (args.requests, args.rounds)
    trees = {"this tree": ROOT}
    if args.against is not None:
        trees = {"against": args.against.resolve(), **trees}
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    for _ in range(rounds):
        for label, tree in trees.items():
            runs[label].append(_run_child(tree, requests))
    table = _table(runs)
    print(table)
    results = args.out
    results.mkdir(parents=True, exist_ok=True)
    report = {
        "requests": requests,
        "rounds": rounds,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "trees": {label: str(tree) for label, tree in trees.items()},
        "runs": runs,
    }
    (results / "submit_path.json").write_text(json.dumps(report, indent=2) + "\n")
    (results / "submit_path.md").write_text(table + "\n")


def _table(runs: dict[str, list[dict[str, float]]]) -> str:
    """Median (min-max) over the rounds of each figure, one row per tree."""
    columns = ["serial_wall_us", "serial_cpu_us", "closed16_wall_us", "closed16_cpu_us"]
    lines = [
        "| tree | serial µs/req | serial CPU µs/req | closed 16 µs/req | closed 16 CPU µs/req |",
        "|---|---|---|---|---|",
    ]
    for label, measured in runs.items():
        cells = []
        for column in columns:
            values = [run[column] for run in measured]
            cells.append(f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})")
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
