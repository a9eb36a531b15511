"""A 4 MiB identity through system shared memory, measured with perf_analyzer.

    python -m benchmarks.shared_memory                       # this tree, HTTP and gRPC
    python -m benchmarks.shared_memory --baseline HEAD~3     # and that commit, alternating
    python -m benchmarks.shared_memory --short               # one short round (smoke test)

Inputs and outputs both in regions (``--shared-memory system --output-shared-memory-size
4194304``), the built-in ``identity`` model with 1,048,576 FP32 values, concurrency 4,
``conveyor serve`` pinned to core 0 and perf_analyzer to core 1. With ``--baseline REF``
that commit (extracted with ``git archive``) is served too, in rounds that alternate with
this tree's, so load from elsewhere on the machine hits both alike; the best round of each
is kept. Writes ``benchmarks/results/shared_memory.md`` and ``.json`` and prints the table.

perf_analyzer comes with tritonclient wheels (see docs/benchmarks.md): set PERF_ANALYZER to
its path if it is not on PATH, and LD_LIBRARY_PATH to where libcudart.so.12 lives.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks import common
from benchmarks.common import markdown, pin_plan, pinned, rate
from benchmarks.large_tensors import serve_tree, source_tree

PROTOCOLS = ("http", "grpc")
VALUES = 1024 * 1024  # FP32: 4 MiB each way
CONCURRENCY = 4
THIS_TREE = "this tree"


def find_perf_analyzer() -> str | None:
    """PERF_ANALYZER, or perf_analyzer on PATH; None (and why, on stderr) if neither."""
    given = os.environ.get("PERF_ANALYZER")
    if given is not None and not os.access(given, os.X_OK):
        print(f"PERF_ANALYZER={given} is not an executable file", file=sys.stderr)
        return None
    found = given or shutil.which("perf_analyzer")
    if found is None:
        print(
            "perf_analyzer not found: put it on PATH or set PERF_ANALYZER to its path "
            "(it comes with the tritonclient wheels; see docs/benchmarks.md)",
            file=sys.stderr,
        )
    return found


def measure(
    perf_analyzer: str, url: str, protocol: str, interval_ms: int, cpus: set[int] | None
) -> tuple[float, float]:
    """(infer/s, average latency in µs) of one perf_analyzer run against ``url``."""
    command = [
        perf_analyzer, "-m", "identity", "-u", url, "-i", protocol,
        "--shape", f"INPUT0:{VALUES}",
        "--shared-memory", "system", "--output-shared-memory-size", str(VALUES * 4),
        "--concurrency-range", str(CONCURRENCY),
        "--measurement-interval", str(interval_ms),
        "--stability-percentage", "200", "--max-trials", "4",
    ]  # fmt: skip
    with pinned(cpus):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    found = re.search(r"throughput: ([\d.]+) infer/sec, latency (\d+) usec", out)
    if found is None:
        raise RuntimeError(f"perf_analyzer said:\n{out}")
    return float(found.group(1)), float(found.group(2))


def one_round(root: Path, perf_analyzer: str, interval_ms: int) -> dict[str, tuple[float, float]]:
    """Both protocols against one server of the tree at ``root``."""
    server_cpus, load_cpus = pin_plan()
    with serve_tree(root, server_cpus) as (http_url, grpc_url):
        urls = {"http": http_url, "grpc": grpc_url}
        return {
            protocol: measure(
                perf_analyzer, urls[protocol].split("://", 1)[1], protocol, interval_ms, load_cpus
            )
            for protocol in PROTOCOLS
        }


def table(runs: dict[str, list[dict[str, tuple[float, float]]]]) -> str:
    trees = list(runs)
    head = ["protocol", *(f"infer/s, {tree}" for tree in trees)]
    if len(trees) == 2:
        head.append("ratio")
    rows: list[list[str]] = [head]
    for protocol in PROTOCOLS:
        best = [max(r[protocol][0] for r in runs[tree]) for tree in trees]
        row = [protocol.upper() if protocol == "http" else "gRPC", *map(rate, best)]
        if len(trees) == 2:
            row.append(f"{best[0] / best[1]:.2f}")
        rows.append(row)
    return markdown(rows, align_left=1)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", metavar="GIT_REF", help="also measure this commit's server")
    p.add_argument("--rounds", type=int, default=2, help="rounds per tree (best kept)")
    p.add_argument("--interval-ms", type=int, default=3000, help="perf_analyzer window")
    p.add_argument("--short", action="store_true", help="one round, 1 s windows")
    p.add_argument("--out", default=str(common.RESULTS))
    args = p.parse_args(argv)
    perf_analyzer = find_perf_analyzer()
    if perf_analyzer is None:
        return 2
    rounds, interval = (1, 1000) if args.short else (args.rounds, args.interval_ms)
    refs: list[str | None] = [None, *([args.baseline] if args.baseline else [])]
    runs: dict[str, list[dict[str, tuple[float, float]]]] = {ref or THIS_TREE: [] for ref in refs}
    for index in range(rounds):
        for ref in refs:
            print(f"== round {index + 1}: {ref or THIS_TREE}", file=sys.stderr)
            with source_tree(ref) as root:
                runs[ref or THIS_TREE].append(one_round(root, perf_analyzer, interval))
    command = common.command_line("benchmarks.shared_memory", argv)
    measured = (
        f"Measured {common.today()} on {common.machine_line()}; 4 MiB FP32 identity, "
        f"inputs and outputs in system shared memory, concurrency {CONCURRENCY}, server "
        f"on one core, perf_analyzer on another; best of {rounds} round(s). Command: "
        f"`{command}`."
    )
    results = {
        tree: [{proto: {"infer_per_s": r[proto][0], "latency_us": r[proto][1]} for proto in r}
               for r in tree_runs]
        for tree, tree_runs in runs.items()
    }  # fmt: skip
    text = common.write_report(args.out, "shared_memory", measured, table(runs), results)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
