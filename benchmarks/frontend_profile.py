"""Where a ``tiny`` request's server CPU goes, per front end: HTTP binary, HTTP JSON, gRPC.

    python -m benchmarks.frontend_profile [--duration 8] [--rate 500] [--transports ...]

``conveyor serve`` (built-in models, default gRPC transport) pinned to core 0, ``conveyor
bench`` on core 1, closed loop at concurrency 16, batch 1. For each front end, two windows:

1. **unprofiled**: infer/s; the server's CPU-seconds in the window from ``/proc`` (the whole
   process, and each thread: the event loop, the model instance threads, the rest), so
   ``server CPU µs per request``; and the engine's own split of the same requests from its
   statistics (queue, compute input / infer / output, µs per request, wall time);
2. **profiled**: ``py-spy record --nonblocking --gil -r RATE -f raw`` on the server during
   the same load. ``--gil`` keeps only the thread holding the GIL at each sample: on one
   core, the thread doing Python work. ``--nonblocking`` never stops the server (stopping
   it at 500 Hz cut its rate to a tenth and changed where the time went); the price is that
   a stack read while it changes can be wrong at its leaf, so the buckets match frames
   anywhere in a stack, not just the leaf, and failed reads are counted as unattributed.

Each sample is put in the first bucket (``BUCKETS``, in order) one of whose names appears
in its stack; a bucket's share of the samples (unreadable ones included, as their own
bucket) times the server's CPU per request gives its µs. That takes the samples to stand
for the CPU: time in C with the GIL released (onnxruntime's own run, epoll) is not sampled,
and on a shared core a thread that holds the GIL while it waits for the CPU is. Also
printed: the top self-time functions per front end (the leaf frame, file and function,
lines merged). Then ``conveyor bench tiny --url inprocess`` on core 0 for the ratio.

Writes benchmarks/results/frontend_profile.{md,json} and the raw py-spy files
(``frontend_profile_<transport>.txt``, collapsed stacks for flamegraph tools).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from benchmarks.common import RESULTS, machine_line, markdown, pin_plan, pinned, run_inprocess
from conveyor.bench import BenchSpec, Point, TargetSpec, run_bench
from conveyor.testing import run_server

TRANSPORTS = ("http-binary", "http-json", "grpc")

# (bucket, names that put a stack in it), first match wins. The names are py-spy's frame
# names ("Class.method" or "function"); they follow the server's code, so re-read them
# when the hot path is renamed (an unmatched stack lands in "other", visible in the table).
# Routing comes before parsing: both front ends start a request from inside the read that
# completed it, so its routing runs under the parser's frames.
BUCKETS: list[tuple[str, tuple[str, ...]]] = [
    ("model run (onnxruntime, with the GIL)", ("OnnxRuntimeModel.run", "Session.run")),
    (
        "wakeups: queue notify/wait, call_soon_threadsafe, future callbacks",
        (
            "Condition.notify",
            "Condition.wait",
            "RequestQueue._sleep",
            "RequestQueue.take",
            "call_soon_threadsafe",
            "_invoke_callbacks",
            "InferFuture.set_result",
            "_write_to_self",
            "_read_from_self",
        ),
    ),
    (
        "engine: execute, split and deliver outputs, statistics",
        (
            "ModelVersion._execute",
            "ModelVersion._deliver",
            "ModelVersion._split_produced",
            "StatsRecorder",
            "ThreadInstances._loop",
        ),
    ),
    ("engine submit", ("Engine.submit", "ModelVersion.submit", "RequestQueue.put")),
    (
        "decode request (JSON / binary / protobuf into numpy)",
        (
            "decode_request",
            "decode_inputs",
            "split (",
            "request_options",
            "json.loads",
            "loads (",
            "check_tensor_parameters",
        ),
    ),
    (
        "encode response",
        (
            "encode_response",
            "PendingInfer._encode",
            "encode_outputs",
            "encode_infer_response",
            "_encode",
            "infer_response_parts",  # gRPC's response pieces
        ),
    ),
    (
        "write (respond, flush, transport.write)",
        (
            "_respond",
            "_flush",
            "write (",
            "writelines",
            "send_headers",
            "send_data",
            "send_message",
            "GrpcConnection._send",
        ),
    ),
    (
        "route and call the data plane (dispatch, request objects)",
        (
            "begin_infer",
            "DataPlane",
            "InferenceServicer",
            "_unary",
            "_UnaryInfer",
            "infer_call",
            "_next",
            "__create_fn__",
        ),
    ),
    (
        "parse (HTTP/1.1 head, HTTP/2 frames, gRPC message)",
        (
            "RequestParser",
            "H2Core",
            "on_headers_complete",
            "on_body",
            "_handle_events",
            "GrpcConnection._handle",
            "GrpcConnection._open",
            "_remote_closed",
        ),
    ),
    ("event loop itself (uvloop's C: epoll, socket I/O, callback dispatch)", ("Runner.run",)),
]
UNATTRIBUTED = "unattributed (stack read failed or no Python frame)"
FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^():]*):\d+\)$")


def listener(http_url: str) -> psutil.Process:
    port = int(http_url.rsplit(":", 1)[1])
    for connection in psutil.net_connections("tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port:
            return psutil.Process(connection.pid)
    raise RuntimeError(f"no process listens on {http_url}")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU-seconds of the threads of ``pid`` by role: the main thread runs the event loop;
    the others are mostly the model's instance threads (Python 3.11 does not give threads
    an OS name, so they are not told apart here)."""
    ticks = os.sysconf("SC_CLK_TCK")
    roles: dict[str, float] = collections.defaultdict(float)
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        seconds = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        if int(task.name) == pid:
            role = "event loop (main thread)"
        else:
            role = "other threads (the model's instance threads, helpers)"
        roles[role] += seconds
    return dict(roles)


def thread_names(pid: int) -> list[str]:
    names = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:
            continue
    return names


def bench(url: str, transport: str, duration: float, warmup: float) -> Any:
    spec = (
        TargetSpec(url, "tiny")
        if transport == "grpc"
        else TargetSpec(url, "tiny", encoding=transport.removeprefix("http-"))
    )
    point = Point(concurrency=16, warmup_s=warmup, duration_s=duration)
    return run_bench(
        BenchSpec(spec, label=f"profile {transport}"),
        [point],
        command="python -m benchmarks.frontend_profile",
    ).points[0]


def bucket_of(frames: list[str]) -> str:
    if not frames or frames == [""]:
        return UNATTRIBUTED
    for bucket, names in BUCKETS:
        for frame in frames:
            if any(name in frame for name in names):
                return bucket
    return "other"


def read_raw(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            stacks.append(([f for f in stack.split(";") if f], int(count)))
    return stacks


def self_time(stacks: list[tuple[list[str], int]], top: int) -> list[tuple[str, int]]:
    leaves: collections.Counter[str] = collections.Counter()
    for frames, count in stacks:
        if not frames:
            continue
        match = FRAME.match(frames[-1])
        leaves[f"{match['name']} ({match['file']})" if match else frames[-1]] += count
    return leaves.most_common(top)


def profile(pid: int, url: str, transport: str, args: argparse.Namespace, out: Path) -> Any:
    raw = out / f"frontend_profile_{transport}.txt"
    py_spy = shutil.which("py-spy") or "py-spy"
    command = [
        py_spy,
        "record",
        "--nonblocking",
        "--gil",
        "-r",
        str(args.rate),
        "-d",
        str(int(args.duration)),
        "-f",
        "raw",
        "-o",
        str(raw),
        "--pid",
        str(pid),
    ]
    _, generator = pin_plan()
    with pinned(generator):
        spy = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)  # py-spy attached before the load's window opens
        point = bench(url, transport, args.duration, args.warmup)
        said = spy.communicate(timeout=60)[0]
    errors = re.search(r"Errors: (\d+)", said)
    return point, read_raw(raw), int(errors[1]) if errors else 0, said.strip().splitlines()


def one(
    pid: int, urls: dict[str, str], transport: str, args: argparse.Namespace, out: Path
) -> dict[str, Any]:
    url = urls["grpc" if transport == "grpc" else "http"]
    process = psutil.Process(pid)
    _, generator = pin_plan()
    with pinned(generator):
        bench(url, transport, 1.0, 0.5)  # connections and caches warm
        times, threads, wall = process.cpu_times(), thread_cpu(pid), time.monotonic()
        point = bench(url, transport, args.duration, args.warmup)
        after, threads_after = process.cpu_times(), thread_cpu(pid)
        elapsed = time.monotonic() - wall
    cpu = (after.user + after.system) - (times.user + times.system)
    # The window's requests: the rate times the whole span the CPU was read over (warm-up
    # included, at the same closed-loop rate).
    requests = point.infer_per_s * elapsed
    per_request = 1e6 * cpu / requests if requests else 0.0
    by_thread = (
        {
            role: 1e6 * (threads_after.get(role, 0.0) - threads.get(role, 0.0)) / requests
            for role in threads_after
        }
        if requests
        else {}
    )
    profiled, stacks, errors, said = profile(pid, url, transport, args, out)
    sampled = sum(count for _, count in stacks) + errors
    buckets: collections.Counter[str] = collections.Counter()
    for frames, count in stacks:
        buckets[bucket_of(frames)] += count
    buckets[UNATTRIBUTED] += errors
    # The GIL was held for sampled / (rate x seconds) of the window, against the server's
    # CPU-seconds per second: on a shared core a thread that holds the GIL while it waits
    # for the CPU is sampled too, so that share is only printed, and the buckets divide the
    # whole CPU per request in the proportions of the samples.
    held = min(1.0, sampled / (args.rate * args.duration)) if args.duration else 0.0
    server_busy = cpu / elapsed
    split = point.server or {}
    return {
        "transport": transport,
        "infer_per_s": point.infer_per_s,
        "p50_ms": point.latency_ms.get("p50"),
        "errors": point.errors,
        "generator_cpu": point.generator_cpu,
        "server_cpu_per_s": server_busy,
        "server_cpu_us_per_request": per_request,
        "us_per_request_from_rate": 1e6 / point.infer_per_s if point.infer_per_s else None,
        "thread_cpu_us_per_request": by_thread,
        "engine_split_us": split,
        "profiled_infer_per_s": profiled.infer_per_s,
        "samples": sampled,
        "sample_errors": errors,
        "gil_held_share_of_wall": held,
        "buckets_us": {b: per_request * n / sampled for b, n in buckets.most_common()}
        if sampled
        else {},
        "self_time_top": [
            (name, 100 * count / sampled) for name, count in self_time(stacks, args.top)
        ]
        if sampled
        else [],
        "py_spy": said[-2:],
    }


def tables(results: list[dict[str, Any]], inprocess: float | None) -> str:
    head = ["", *(r["transport"] for r in results)]
    lines = [head]

    def row(label: str, cell: Any) -> None:
        lines.append([label, *(cell(r) for r in results)])

    row("infer/s (unprofiled)", lambda r: f"{r['infer_per_s']:,.0f}")
    row(
        "vs in-process",
        lambda r: f"{100 * r['infer_per_s'] / inprocess:.0f}%" if inprocess else "-",
    )
    row("1e6 / rate, µs", lambda r: f"{r['us_per_request_from_rate']:.0f}")
    row("server CPU µs / request (/proc)", lambda r: f"{r['server_cpu_us_per_request']:.0f}")
    roles = sorted({role for r in results for role in r["thread_cpu_us_per_request"]})
    for role in roles:
        row(f"… {role}", lambda r, role=role: f"{r['thread_cpu_us_per_request'].get(role, 0):.0f}")
    for key, label in (
        ("queue_us", "engine queue"),
        ("compute_input_us", "engine input"),
        ("compute_infer_us", "engine infer (model run, wall)"),
        ("compute_output_us", "engine output"),
    ):
        row(
            f"{label} µs (statistics)", lambda r, key=key: f"{r['engine_split_us'].get(key, 0):.0f}"
        )
    names = [bucket for bucket, _ in BUCKETS] + ["other", UNATTRIBUTED]
    split = [
        [
            "CPU µs per request, by top-level frame (py-spy --gil)",
            *(r["transport"] for r in results),
        ]
    ]
    for name in names:
        if any(r["buckets_us"].get(name) for r in results):
            split.append([name, *(f"{r['buckets_us'].get(name, 0):.1f}" for r in results)])
    split.append(["total", *(f"{r['server_cpu_us_per_request']:.0f}" for r in results)])
    text = [markdown(lines, align_left=1), "", markdown(split, align_left=1)]
    for r in results:
        top = [
            ["self time (leaf frame)", "% of GIL samples"],
            *([name, f"{share:.1f}"] for name, share in r["self_time_top"]),
        ]
        text += [
            "",
            f"{r['transport']}: top self-time functions ({r['samples']} samples, "
            f"{r['sample_errors']} unreadable; {r['profiled_infer_per_s']:,.0f} infer/s "
            "while profiled)",
            "",
            markdown(top, align_left=1),
        ]
    return "\n".join(text)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=8.0, help="seconds per window")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    p.add_argument("--top", type=int, default=10, help="self-time functions listed")
    p.add_argument("--transports", default=",".join(TRANSPORTS))
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    server_cpus, _ = pin_plan()
    load_before = os.getloadavg()[0]
    results = []
    with contextlib.ExitStack() as stack:
        with pinned(server_cpus):  # the server inherits core 0; this process keeps its cores
            server = stack.enter_context(run_server(extra_args=["--log-level", "warning"]))
        pid = listener(server.http_url).pid
        urls = {"http": server.http_url, "grpc": server.grpc_url}
        for transport in args.transports.split(","):
            print(f"== {transport}", file=sys.stderr)
            results.append(one(pid, urls, transport, args, args.out))
    report = run_inprocess(
        "tiny", [16], duration=args.duration, warmup=args.warmup, cpus=server_cpus
    )
    inprocess = report.points[0].infer_per_s
    text = "\n".join(
        [
            f"{machine_line()}; load average {load_before:.1f} at the start. tiny, closed loop, "
            f"concurrency 16, batch 1; server on core 0, generator and py-spy on core 1; "
            f"{args.duration:g} s windows; in-process engine on core 0: {inprocess:,.0f} infer/s. "
            f"Command: `{' '.join(['python -m benchmarks.frontend_profile', *sys.argv[1:]])}`.",
            "",
            tables(results, inprocess),
            "",
        ]
    )
    (args.out / "frontend_profile.md").write_text(text)
    (args.out / "frontend_profile.json").write_text(
        json.dumps({"inprocess_infer_per_s": inprocess, "results": results}, indent=1, default=str)
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
