"""Front-end processes (``conveyor serve --workers N``): what one costs, what N buy.

For each layout, serves the tiny ONNX model (FP32 [1, 16] + 1, so the front end's work
dominates) and measures, with tritonclient over HTTP (binary tensors):

- latency at concurrency 1 (p50, p90): the round trip to the engine process is what a
  front-end process adds to every request over one process (which has no such hop);
- throughput at ``--concurrency`` for ``--duration`` s, and the server's CPU-seconds in that
  window (the engine process plus every front-end process, user + system), so
  ``infer/s per server CPU-s``: flat from 1 to 2 front-end processes means they scale;
- memory after the run: RSS and PSS (proportional: shared pages split) of each process.

The layouts (``--workers``, comma-separated): ``1`` is one process (``--workers 1``),
``1p`` one front-end process beside the engine's (``--workers 1 --front-end-process``),
``N`` N front-end processes (``--workers N``).

    python -m benchmarks.frontends                      # 1 and 2, table
    python -m benchmarks.frontends --quick              # smoke test (2 s windows)
    python -m benchmarks.frontends --workers 1,1p,2,4 --concurrency 16
    PERF_ANALYZER=/path/to/perf_analyzer python -m benchmarks.frontends \
        --generator perf_analyzer --rounds 3            # the lighter generator, alternating
    PERF_ANALYZER=... python -m benchmarks.frontends --generator perf_analyzer \
        --workers 1,1p,2 --rate-per-front-end 1500      # the same load on each front end
    python -m benchmarks.frontends --generator bench --rounds 3 --concurrency 16
        # conveyor bench (HTTP binary) pinned to the last core: no perf_analyzer needed

The load generator shares the machine's cores with the server. Its Python threads
(``--generator threads``, the default) take a core of their own and more, and the server's
processes then pay for the contention (more context switches and cache misses per request,
most of all with several processes). perf_analyzer (C++) costs far less, and so does
``conveyor bench`` (``--generator bench``, on the last core only); with either, the
answered requests are counted from the server's own statistics over the whole run, CPU
included. With ``--rounds`` the front-end counts alternate, so load from elsewhere hits
each alike, and the median round of each is kept.

At saturation (closed loop, ``--concurrency``) one busy event loop answers many requests per
wakeup, and two front ends each less busy answer fewer: a loop's CPU per request depends
on how loaded it is. ``--rate-per-front-end R`` (perf_analyzer only) offers R requests a
second per front end instead (open loop), so each front end carries the same load
whatever their number: how throughput grows with cores. Results go to
benchmarks/results/frontends.json (``frontends-quick.json`` with ``--quick``): compare
ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.common import RESULTS, child_env, machine_line, markdown, pinned
from benchmarks.shared_memory import find_perf_analyzer
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


def answered_so_far(server: RunningServer) -> int:
    """Requests of ``tiny`` the server has answered, from its statistics endpoint (the
    whole server's, whichever front end took them)."""
    with urllib.request.urlopen(f"{server.http_url}/v2/models/tiny/stats", timeout=10) as r:
        stats = json.load(r)
    return int(stats["model_stats"][0]["inference_stats"]["success"]["count"])


def perf_analyzer_load(concurrency: int, rate: float | None) -> list[str]:
    """perf_analyzer's load options: closed loop at ``concurrency``, or ``rate`` requests a
    second (open loop) when given."""
    if rate is not None:
        return ["--request-rate-range", f"{rate:g}"]
    return ["--concurrency-range", str(concurrency)]


def throughput_perf_analyzer(
    server: RunningServer, perf_analyzer: str, load: list[str], duration: float
) -> tuple[int, list[float], float]:
    """(requests answered, each server process's CPU-seconds, wall seconds) over one
    perf_analyzer run (its warm-up and every window it needed to be stable)."""
    command = [
        perf_analyzer, "-m", "tiny", "-u", server.http_url.removeprefix("http://"),
        "-i", "http", "-b", "1", "--shape", "INPUT0:1,16", *load,
        "--measurement-interval", str(int(duration * 1000)),
        "--stability-percentage", "200", "--max-trials", "3",
    ]  # fmt: skip
    processes = server_processes(server)
    answered_before, cpu_before = answered_so_far(server), cpu_seconds(processes)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=30 + 10 * duration)
    elapsed = time.perf_counter() - started
    cpu_after, answered_after = cpu_seconds(processes), answered_so_far(server)
    if done.returncode != 0:
        raise RuntimeError(f"perf_analyzer failed:\n{done.stdout}{done.stderr}")
    per_process = [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
    return answered_after - answered_before, per_process, elapsed


def throughput_bench(
    server: RunningServer, concurrency: int, duration: float
) -> tuple[int, list[float], float]:
    """(requests answered, each server process's CPU-seconds, wall seconds) over one
    ``conveyor bench`` run (closed loop, HTTP binary) in a child process pinned to the last
    core: a generator that costs the server's cores about a tenth of Python threads'."""
    command = [
        sys.executable, "-m", "conveyor", "bench", "tiny", "--url", server.http_url,
        "-c", str(concurrency), "-d", str(duration), "--warmup", "0.5", "-q",
    ]  # fmt: skip
    processes = server_processes(server)
    answered_before, cpu_before = answered_so_far(server), cpu_seconds(processes)
    started = time.perf_counter()
    generator = {sorted(os.sched_getaffinity(0))[-1]}
    with pinned(generator):
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=60 + 2 * duration, env=child_env()
        )
    elapsed = time.perf_counter() - started
    cpu_after, answered_after = cpu_seconds(processes), answered_so_far(server)
    if done.returncode != 0:
        raise RuntimeError(f"conveyor bench failed:\n{done.stdout}{done.stderr}")
    per_process = [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
    return answered_after - answered_before, per_process, elapsed


def layout_arguments(layout: str) -> tuple[list[str], int]:
    """(``conveyor serve`` options, front ends) of a layout: ``1`` (one process), ``1p``
    (one front-end process) or ``N`` (N front-end processes)."""
    if layout == "1p":
        return ["--workers", "1", "--front-end-process"], 1
    if not layout.isdigit() or int(layout) < 1:
        raise ValueError(f"a layout is 1, 1p or a front-end count above 1, not {layout!r}")
    return ["--workers", layout], int(layout)


def measure(layout: str, args: argparse.Namespace, repository: Path) -> dict[str, Any]:
    options, front_ends = layout_arguments(layout)
    with run_server(repository, extra_args=[*options, "--log-level", "warning"]) as server:
        if layout != "1":
            time.sleep(2)  # every front end listening (they start beside the engine)
        seconds = sorted(latency(server, args.latency_requests))
        rate = None if args.rate_per_front_end is None else args.rate_per_front_end * front_ends
        if args.generator == "bench":
            answered, per_process, elapsed = throughput_bench(
                server, args.concurrency, args.duration
            )
        elif args.perf_analyzer is None:
            answered, per_process = throughput(server, args.concurrency, args.duration)
            elapsed = args.duration
        else:
            load = perf_analyzer_load(args.concurrency, rate)
            answered, per_process, elapsed = throughput_perf_analyzer(
                server, args.perf_analyzer, load, args.duration
            )
        cpu = sum(per_process)
        return {
            "workers": layout,
            "offered": f"concurrency {args.concurrency}" if rate is None else f"{rate:g}/s",
            "generator": args.generator,
            "p50_ms": 1000 * seconds[len(seconds) // 2],
            "p90_ms": 1000 * seconds[int(len(seconds) * 0.9)],
            "infer_per_s": answered / elapsed,
            "server_cpu_per_s": cpu / elapsed,
            "infer_per_cpu_s": answered / cpu if cpu else 0.0,
            # CPU microseconds per request in the engine process (and, with front-end
            # processes, in each of those): what limits how far front ends scale.
            "engine_cpu_us": 1e6 * per_process[0] / answered if answered else 0.0,
            "front_end_cpu_us": [1e6 * c / answered for c in per_process[1:]] if answered else [],
            "memory": memory(server_processes(server)),
        }


def median_round(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The round whose infer per CPU-second is the median of the rounds'."""
    ordered = sorted(measured, key=lambda r: r["infer_per_cpu_s"])
    return {**ordered[len(ordered) // 2], "rounds_infer_per_cpu_s": [
        round(r["infer_per_cpu_s"]) for r in measured]}  # fmt: skip


def ratios_to_first(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Each layout's infer per CPU-second over the first layout's, round by round (the
    rounds alternate, so each pair saw the same moment's load), median of the rounds."""
    layouts = list(rounds)
    first = rounds[layouts[0]]
    medians = {}
    for layout in layouts:
        per_round = sorted(
            r["infer_per_cpu_s"] / f["infer_per_cpu_s"]
            for r, f in zip(rounds[layout], first, strict=True)
        )
        medians[layout] = per_round[len(per_round) // 2]
    return medians


def table(results: list[dict[str, Any]]) -> str:
    rows = [["layout", "offered", "p50 ms (c=1)", "p90 ms", "infer/s", "server CPU-s/s",
             "infer per CPU-s", "vs first", "engine process CPU us/req", "front ends CPU us/req",
             "RSS MB (each)", "PSS MB (sum)"]]  # fmt: skip
    for r in results:
        rss = " + ".join(f"{m['rss_mb']:.0f}" for m in r["memory"])
        pss = sum(m["pss_mb"] for m in r["memory"])
        rows.append([str(r["workers"]), r["offered"], f"{r['p50_ms']:.2f}", f"{r['p90_ms']:.2f}",
                     f"{r['infer_per_s']:,.0f}", f"{r['server_cpu_per_s']:.2f}",
                     f"{r['infer_per_cpu_s']:,.0f}", f"{100 * r['per_cpu_vs_first']:.0f} %",
                     f"{r['engine_cpu_us']:.0f}",
                     f"{sum(r['front_end_cpu_us']):.0f}" if r["front_end_cpu_us"] else "-",
                     rss, f"{pss:.0f}"])  # fmt: skip
    return markdown(rows, align_left=0)


LAYOUT_NAMES = {"1": "one process", "1p": "1 front-end\nprocess"}


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """One panel per run (each a written results file): infer per server CPU-second of each
    layout, the median round as a bar and every round as a dot, labelled with its ratio to
    the first layout and its infer/s."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.6 * len(runs), 3.8), squeeze=False)
    for axis, run in zip(axes[0], runs, strict=True):
        results = run["results"]
        names = [LAYOUT_NAMES.get(r["workers"], f"{r['workers']} front-end\nprocesses")
                 for r in results]  # fmt: skip
        xs = range(len(results))
        axis.bar(xs, [r["infer_per_cpu_s"] for r in results], color="tab:blue", alpha=0.6)
        for x, r in zip(xs, results, strict=True):
            dots = r["rounds_infer_per_cpu_s"]
            axis.plot([x] * len(dots), dots, "k.", markersize=4)
            label = f"{100 * r['per_cpu_vs_first']:.0f} %\n{r['infer_per_s']:,.0f}/s"
            top = max([r["infer_per_cpu_s"], *dots])  # above the bar and every dot
            axis.annotate(label, (x, top), ha="center", va="bottom",
                          xytext=(0, 3), textcoords="offset points", fontsize=8)  # fmt: skip
        axis.set_xticks(list(xs), names, fontsize=8)
        axis.set_ylabel("infer per server CPU-second")
        axis.set_ylim(0, 1.25 * max(max(r["rounds_infer_per_cpu_s"]) for r in results))
        offered = results[0]["offered"]  # the first layout has one front end
        load = f"{offered} per front end" if offered.endswith("/s") else f"closed loop, {offered}"
        axis.set_title(f"tiny over HTTP, {load}", fontsize=9)
    fig.suptitle("Front-end processes: bar = median round, dots = rounds; label = vs first, "
                 "infer/s", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workers", default="1,2",
        help="layouts, comma-separated: 1 (one process), 1p (one front-end process), N",
    )  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per window")
    parser.add_argument("--latency-requests", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="smoke test: short windows")
    parser.add_argument(
        "--generator", choices=("threads", "perf_analyzer", "bench"), default="threads",
        help="tritonclient in Python threads, perf_analyzer (PERF_ANALYZER or on PATH), or "
        "conveyor bench pinned to the last core",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds (median kept)")
    parser.add_argument(
        "--rate-per-front-end", type=float, default=None, metavar="R",
        help="perf_analyzer only: offer R requests/s per front end (open loop) instead of "
        "--concurrency",
    )  # fmt: skip
    parser.add_argument(
        "--plot", nargs="+", type=Path, metavar="RESULTS_JSON",
        help="only plot these written results files (one panel each) to --plot-out",
    )  # fmt: skip
    parser.add_argument("--plot-out", type=Path, default=RESULTS / "frontends.png")
    args = parser.parse_args()
    if args.plot:
        plot([json.loads(f.read_text()) for f in args.plot], args.plot_out)
        print(f"written to {args.plot_out}")
        return
    if args.rate_per_front_end is not None and args.generator != "perf_analyzer":
        parser.error("--rate-per-front-end needs --generator perf_analyzer")
    if args.quick:
        args.duration, args.latency_requests = 2.0, 100
    args.perf_analyzer = None
    if args.generator == "perf_analyzer":
        args.perf_analyzer = find_perf_analyzer()
        if args.perf_analyzer is None:
            raise SystemExit(2)
    layouts = args.workers.split(",")
    for layout in layouts:
        try:
            layout_arguments(layout)
        except ValueError as error:
            parser.error(str(error))
    rounds: dict[str, list[dict[str, Any]]] = {layout: [] for layout in layouts}
    with tempfile.TemporaryDirectory() as folder:
        RepoBuilder(Path(folder)).tiny()
        for _ in range(args.rounds):
            for layout in layouts:
                rounds[layout].append(measure(layout, args, Path(folder)))
    ratios = ratios_to_first(rounds)
    results = [
        {**median_round(rounds[layout]), "per_cpu_vs_first": ratios[layout]} for layout in layouts
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / ("frontends-quick.json" if args.quick else "frontends.json")
    everything = {"machine": machine_line(), "results": results, "rounds": rounds}
    out.write_text(json.dumps(everything, indent=2))
    with contextlib.suppress(ImportError):  # matplotlib: conveyor[bench]
        plot([everything], out.with_suffix(".png"))
    print(machine_line())
    print(table(results))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
