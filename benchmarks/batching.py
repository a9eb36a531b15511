"""What dynamic batching buys: throughput at concurrency 16 on models with a per-call cost.

    python -m benchmarks.batching [--quick]

Two models, each served twice from a temporary repository, identical except for
``[dynamic_batching]``:

- ``sleepy``: a Python model whose every call costs 2 ms whatever its batch holds (a fixed
  per-call cost: a remote call, a kernel launch), with one instance. Unbatched it can do
  at most 500 calls/s; batched, each call serves up to 16 requests.
- ``mlp``: the built-in ONNX MLP (256 -> 2048 -> 16), one instance, one intra-op thread.
  Its per-call cost is onnxruntime's overhead plus reading 2 MB of weights, shared by a batch.

Each runs in-process (the engine and the generator in one process, pinned to one core),
closed loop at concurrency 1, 4 and 16. The table shows throughput, latency, the average
batch the engine formed, and the gain over the unbatched twin; at concurrency 1 batching
can only cost (a lone request may wait ``max_queue_delay_us`` for company).
Writes benchmarks/results/batching.md and batching.png.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

from benchmarks import common
from benchmarks.common import RESULTS, markdown, ms, pin_plan, rate
from conveyor.bench.plot import plot_reports
from conveyor.examples import onnx_models

SLEEPY = textwrap.dedent(
    """
    import time

    class Model:
        def infer(self, inputs):
            time.sleep(0.002)  # the fixed cost of one call, however many requests it carries
            return {"OUTPUT0": inputs["INPUT0"] * 2}
    """
)

SLEEPY_CONFIG = """
backend = "python"
max_batch_size = 16
instances = 1
max_queue_size = 1024
{batching}
[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [16]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [16]
"""

MLP_CONFIG = """
backend = "onnxruntime"
max_batch_size = 64
instances = 1
max_queue_size = 1024
{batching}
[onnxruntime]
intra_op_threads = 1
"""

BATCHING = "\n[dynamic_batching]\nmax_queue_delay_us = 500\n"


def build_repository(root: Path) -> list[tuple[str, str, bool]]:
    """(model name, family, batched) for each model written under ``root``."""
    models = []
    for batched in (False, True):
        suffix = "batched" if batched else "unbatched"
        section = BATCHING if batched else ""
        sleepy = root / f"sleepy_{suffix}"
        (sleepy / "1").mkdir(parents=True)
        (sleepy / "1" / "model.py").write_text(SLEEPY)
        (sleepy / "config.toml").write_text(SLEEPY_CONFIG.format(batching=section))
        models.append((sleepy.name, "sleepy", batched))
        mlp = root / f"mlp_{suffix}"
        onnx_models.mlp(mlp / "1" / "model.onnx")
        (mlp / "config.toml").write_text(MLP_CONFIG.format(batching=section))
        models.append((mlp.name, "mlp", batched))
    return models


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--duration", type=float)
    p.add_argument("--concurrency", default="1,4,16")
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    duration = args.duration or (1.0 if args.quick else 3.0)
    warmup = 0.3 if args.quick else 1.0
    concurrency = [int(c) for c in args.concurrency.split(",")]
    cpus, _generator = pin_plan()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        models = build_repository(Path(tmp))
        reports = {}
        for name, family, batched in models:
            print(f"== {name}", file=sys.stderr)
            reports[(family, batched)] = common.run_inprocess(
                name,
                concurrency,
                duration=duration,
                warmup=warmup,
                cpus=cpus,
                repository=tmp,
                label=f"{family} {'batched' if batched else 'unbatched'}",
            )
    rows = [
        (
            "model",
            "dynamic batching",
            "c",
            "infer/s",
            "p50 ms",
            "p99 ms",
            "avg batch",
            "throughput gain",
            "p50 cost ms",
        )
    ]
    for family in ("sleepy", "mlp"):
        plain = {pt.concurrency: pt for pt in reports[(family, False)].points}
        for batched in (False, True):
            for pt in reports[(family, batched)].points:
                ref = plain[pt.concurrency]
                gain = pt.infer_per_s / ref.infer_per_s if ref.infer_per_s else 0.0
                cost = (
                    pt.latency_ms["p50"] - ref.latency_ms["p50"]
                    if pt.latency_ms["p50"] is not None and ref.latency_ms["p50"] is not None
                    else None
                )
                batch = (pt.server or {}).get("avg_batch")
                rows.append(
                    (
                        family,
                        "on" if batched else "off",
                        str(pt.concurrency),
                        rate(pt.infer_per_s),
                        ms(pt.latency_ms["p50"]),
                        ms(pt.latency_ms["p99"]),
                        f"{batch:.1f}" if batch else "-",
                        f"{gain:.2f}x" if batched else "",
                        (f"{cost:+.2f}" if cost is not None else "-") if batched else "",
                    )
                )
    plot_reports(
        list(reports.values()), out / "batching.png", title="dynamic batching, in-process, one core"
    )
    pinning = f"pinned to core {sorted(cpus)[0]}" if cpus else "not pinned"
    text = (
        f"Measured {common.today()} on {common.machine_line()}; in-process, {pinning}; "
        f"closed loop, {duration:g} s per point after {warmup:g} s warm-up; "
        f"max_queue_delay_us = 500. Command: `python -m benchmarks.batching"
        f"{' --quick' if args.quick else ''}`.\n\n{markdown(rows, align_left=3)}\n"
    )
    (out / "batching.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
