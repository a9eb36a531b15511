"""4 MiB over gRPC: ``conveyor serve`` beside a server that does nothing, both driven by
perf_analyzer, to tell the server's limit from the load generator's.

    PERF_ANALYZER=/path/to/perf_analyzer python -m benchmarks.large_grpc_ceiling [--rounds 3]

The built-in ``identity`` model with 1,048,576 FP32 values each way at concurrency 4, the
server pinned to one core and perf_analyzer to another, in rounds that alternate between
``conveyor serve`` and the canned server of ``benchmarks.grpc_ceiling`` (a prebuilt 4 MiB
answer on Conveyor's own HTTP/2 transport, nothing behind it), so both see the same machine.
Each run also records how busy the two cores were (``/proc/stat``, kernel time included):
when the generator's core is full and the canned server is no faster than the real one, the
generator is the limit, and ``infer/s / server core busy`` estimates what the server alone
could do on its core. Writes ``benchmarks/results/large_grpc_ceiling.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import NamedTuple

from benchmarks import common
from benchmarks.common import markdown, pin_plan, pinned, rate
from benchmarks.grpc_ceiling import canned_server
from benchmarks.large_tensors import serve_tree
from benchmarks.shared_memory import find_perf_analyzer

VALUES = 1024 * 1024  # FP32: 4 MiB each way
CONCURRENCY = 4
SERVERS = ("conveyor serve", "canned (no-op)")


@contextlib.contextmanager
def conveyor_serve(cpus: set[int]) -> Iterator[int]:
    """``conveyor serve`` of this checkout pinned to ``cpus``; its gRPC port."""
    with serve_tree(common.ROOT, cpus) as (_, grpc_url):
        yield int(grpc_url.rsplit(":", 1)[1])


class Run(NamedTuple):
    rate: float  # infer/s
    latency_us: float
    server_busy: float  # fraction of the server's core, kernel time included
    generator_busy: float


def core_ticks(cpu: int) -> tuple[int, int]:
    """(busy, total) clock ticks of ``cpu`` since boot, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        fields = line.split()
        if fields[0] == f"cpu{cpu}":
            ticks = [int(value) for value in fields[1:]]
            idle = ticks[3] + ticks[4]  # idle and iowait
            return sum(ticks) - idle, sum(ticks)
    raise RuntimeError(f"no cpu{cpu} line in /proc/stat")


def busy_between(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total else 0.0


def measure(perf_analyzer: str, port: int, interval_ms: int, cores: tuple[int, int]) -> Run:
    """One perf_analyzer run against 127.0.0.1:``port`` and how busy both cores were."""
    command = [
        perf_analyzer, "-m", "identity", "-u", f"127.0.0.1:{port}", "-i", "grpc",
        "--shape", f"INPUT0:{VALUES}", "--concurrency-range", str(CONCURRENCY),
        "--measurement-interval", str(interval_ms),
        "--stability-percentage", "200", "--max-trials", "4",
    ]  # fmt: skip
    server_core, generator_core = cores
    before = core_ticks(server_core), core_ticks(generator_core)
    with pinned({generator_core}):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    after = core_ticks(server_core), core_ticks(generator_core)
    out = done.stdout + done.stderr
    found = re.search(r"throughput: ([\d.]+) infer/sec, latency (\d+) usec", out)
    if found is None:
        raise RuntimeError(f"perf_analyzer said:\n{out}")
    return Run(
        float(found.group(1)),
        float(found.group(2)),
        busy_between(before[0], after[0]),
        busy_between(before[1], after[1]),
    )


def table(runs: dict[str, list[Run]]) -> str:
    rows = [["server", "infer/s (median)", "runs", "server core busy", "generator core busy",
             "infer/s per server core"]]  # fmt: skip
    for server, measured in runs.items():
        middle = sorted(measured, key=lambda run: run.rate)[len(measured) // 2]
        rows.append(
            [
                server,
                rate(middle.rate),
                ", ".join(rate(run.rate) for run in measured),
                f"{middle.server_busy:.0%}",
                f"{middle.generator_busy:.0%}",
                rate(middle.rate / middle.server_busy) if middle.server_busy else "-",
            ]
        )
    return markdown(rows, align_left=1)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds (each runs both servers)")
    p.add_argument("--interval-ms", type=int, default=4000, help="perf_analyzer window")
    p.add_argument("--out", default=str(common.RESULTS))
    args = p.parse_args(argv)
    perf_analyzer = find_perf_analyzer()
    if perf_analyzer is None:
        return 2
    server_cpus, generator_cpus = pin_plan()
    if not server_cpus or not generator_cpus:
        print("needs two cores: one for the server, one for perf_analyzer", file=sys.stderr)
        return 2
    cores = (min(server_cpus), min(generator_cpus))

    starts: dict[str, Callable[[set[int]], AbstractContextManager[int]]] = {
        SERVERS[0]: conveyor_serve,
        SERVERS[1]: canned_server,
    }
    runs: dict[str, list[Run]] = {server: [] for server in SERVERS}
    for index in range(args.rounds):
        for server, start in starts.items():
            print(f"== round {index + 1}: {server}", file=sys.stderr)
            with start({cores[0]}) as port:
                runs[server].append(measure(perf_analyzer, port, args.interval_ms, cores))
    command = common.command_line("benchmarks.large_grpc_ceiling", argv)
    measured = (
        f"Measured {common.today()} on {common.machine_line()}; 4 MiB FP32 identity over "
        f"gRPC, concurrency {CONCURRENCY}, server on core {cores[0]}, perf_analyzer on "
        f"core {cores[1]}; {args.rounds} alternating round(s). Command: `{command}`."
    )
    data = {server: [run._asdict() for run in done] for server, done in runs.items()}
    text = common.write_report(args.out, "large_grpc_ceiling", measured, table(runs), data)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
