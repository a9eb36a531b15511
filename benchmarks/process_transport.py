"""What crossing the process boundary costs: small-tensor latency and 4 MiB throughput.

One python identity model (OUTPUT0 = INPUT0.copy()), one instance, thread vs process.
Latencies: one request at a time from one client thread, so the difference between the two
kinds is the cost of the trip to the worker process and back (copies through shared memory,
two small pickled messages, two wake-ups). "4 clients": four threads submitting back to
back, so the instance never idles; 1 / throughput is the cost of a request when busy.

    python -m benchmarks.process_transport            # table
    python -m benchmarks.process_transport --json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np

from conveyor import Engine

MODEL = textwrap.dedent(
    """
    class Model:
        def infer(self, inputs):
            return {"OUTPUT0": inputs["INPUT0"].copy()}
    """
)

CONFIG = """
backend = "python"
instances = 1
instance_kind = "{kind}"

[[inputs]]
name = "INPUT0"
datatype = "{datatype}"
shape = [-1]

[[outputs]]
name = "OUTPUT0"
datatype = "{datatype}"
shape = [-1]
"""

MIB = 2**20


def serve(root: Path, kind: str) -> Engine:
    repo = root / kind
    for name, datatype in (("fp32", "FP32"), ("text", "BYTES")):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(MODEL)
        (repo / name / "config.toml").write_text(CONFIG.format(kind=kind, datatype=datatype))
    return Engine.from_repository(repo)


def latencies(engine: Engine, model: str, x: np.ndarray, count: int) -> np.ndarray:
    inputs = {"INPUT0": x}
    for _ in range(min(50, count)):
        engine.submit(model, inputs).result(30)
    times = np.empty(count)
    for i in range(count):
        start = time.perf_counter()
        engine.submit(model, inputs).result(30)
        times[i] = time.perf_counter() - start
    return times


def throughput(engine: Engine, model: str, x: np.ndarray, clients: int, seconds: float) -> float:
    """Requests/s with ``clients`` threads submitting back to back: no idle wake-ups."""
    inputs = {"INPUT0": x}
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            engine.submit(model, inputs).result(30)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    before = engine.statistics(model)[0].success.count
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(30)
    done = engine.statistics(model)[0].success.count - before
    return done / (time.perf_counter() - started)


def measure(kind: str, small: int, large: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp), kind) as engine:
        tiny = latencies(engine, "fp32", np.ones(16, np.float32), small)
        busy = throughput(engine, "fp32", np.ones(16, np.float32), 4, 2.0)
        big = latencies(engine, "fp32", np.ones(4 * MIB // 4, np.float32), large)
        text = np.array([b"x" * 100] * 100, dtype=object)  # 100 BYTES elements of 100 bytes
        words = latencies(engine, "text", text, small // 4)
    return {
        "small_p50_us": float(np.median(tiny) * 1e6),
        "small_mean_us": float(tiny.mean() * 1e6),
        "small_busy_rps": busy,
        "small_busy_us": 1e6 / busy,
        "large_p50_ms": float(np.median(big) * 1e3),
        "large_mib_s": float(4 / big.mean()),
        "bytes_p50_us": float(np.median(words) * 1e6),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=4000, help="small requests per kind")
    parser.add_argument("--large", type=int, default=200, help="4 MiB requests per kind")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {kind: measure(kind, args.small, args.large) for kind in ("thread", "process")}
    if args.json:
        print(json.dumps(results))
        return
    t, p = results["thread"], results["process"]
    print("python identity model, 1 instance, one request at a time")
    print(f"{'':34} {'thread':>10} {'process':>10} {'difference':>11}")
    rows = [
        ("FP32 [16], p50 latency (us)", "small_p50_us"),
        ("FP32 [16], mean latency (us)", "small_mean_us"),
        ("FP32 [16], 4 clients: req/s", "small_busy_rps"),
        ("FP32 [16], 4 clients: us/request", "small_busy_us"),
        ("BYTES 100 x 100 B, p50 (us)", "bytes_p50_us"),
        ("FP32 4 MiB, p50 latency (ms)", "large_p50_ms"),
        ("FP32 4 MiB, throughput (MiB/s)", "large_mib_s"),
    ]
    for label, key in rows:
        print(f"{label:<34} {t[key]:>10.1f} {p[key]:>10.1f} {p[key] - t[key]:>+11.1f}")


if __name__ == "__main__":
    main()
