"""What does the access log cost? ``tiny`` over HTTP, the access log off and on, one server.

The server (pinned to core 0) writes its log to a file, as a deployed server would; the
load generator (``conveyor bench``, pinned to core 1) drives ``tiny`` at one concurrency.
Between rounds the access log is switched through the logging extension (``POST
/v2/logging``), so every round runs on the same process, and off and on alternate so a
change in the machine's load hits both alike. The figure is each mode's median round.

    python -m benchmarks.access_log              # 3 rounds of 5 s per mode
    python -m benchmarks.access_log --short      # 1 round of 1 s per mode (a smoke test)

Writes benchmarks/results/access_log.json and prints a table for docs/logging.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from benchmarks.common import (
    RESULTS,
    child_env,
    machine_line,
    markdown,
    ms,
    pin_plan,
    pinned,
    rate,
    serve,
)
from conveyor.bench import Report, read_json


def switch_access_log(http_url: str, on: bool) -> None:
    body = json.dumps({"access_log": on}).encode()
    request = urllib.request.Request(f"{http_url}/v2/logging", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert json.loads(answer.read())["access_log"] is on


def one_round(
    http_url: str, concurrency: int, duration: float, cpus: set[int] | None, label: str
) -> Report:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        command = [
            sys.executable, "-m", "conveyor", "bench", "tiny", "--url", http_url,
            "-c", str(concurrency), "-d", str(duration), "--warmup", "0.5",
            "-q", "--json", str(out), "--label", label,
        ]  # fmt: skip
        with pinned(cpus):
            done = subprocess.run(
                command, env=child_env(), capture_output=True, text=True, timeout=duration + 90
            )
        if not out.exists():
            raise RuntimeError(f"bench failed:\n{done.stdout}\n{done.stderr}")
        return read_json(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="1 round of 1 s per mode")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per round")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    rounds, duration = (1, 1.0) if args.short else (args.rounds, args.duration)
    server_cpus, generator_cpus = pin_plan()
    results: dict[str, list[dict]] = {"off": [], "on": []}
    with serve(server_cpus) as (http_url, _grpc_url):
        for _ in range(rounds):
            for mode in ("off", "on"):
                switch_access_log(http_url, mode == "on")
                report = one_round(http_url, args.concurrency, duration, generator_cpus, mode)
                point = report.points[0]
                results[mode].append(
                    {
                        "infer_per_s": point.infer_per_s,
                        "p50_ms": point.latency_ms["p50"],
                        "p99_ms": point.latency_ms["p99"],
                        "errors": point.errors,
                    }
                )
    rows = [["access log", "infer/s (median round)", "p50 ms", "p99 ms"]]
    medians = {}
    for mode, points in results.items():
        medians[mode] = {
            key: statistics.median(p[key] for p in points)
            for key in ("infer_per_s", "p50_ms", "p99_ms")
        }
        m = medians[mode]
        rows.append([mode, rate(m["infer_per_s"]), ms(m["p50_ms"]), ms(m["p99_ms"])])
    table = markdown(rows, align_left=1)
    cost = 1 - medians["on"]["infer_per_s"] / medians["off"]["infer_per_s"]
    summary = (
        f"tiny over HTTP, concurrency {args.concurrency}, {rounds} x {duration:g} s per mode; "
        f"{machine_line()}"
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "access_log.json").write_text(
        json.dumps({"summary": summary, "rounds": results, "medians": medians}, indent=2)
    )
    print(table)
    print(f"\nthroughput with the access log on: {-cost:+.1%} ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
