"""Soak: steady load on a real server for a while; does its memory or fd count creep?

Starts ``conveyor serve`` (built-in examples) on loopback, drives ``tiny`` over HTTP from
``--clients`` threads (closed loop: each sends its next request when the last is answered)
for ``--seconds``, samples the server's resident memory and open file descriptors once a
second, and reports the least-squares slope of each over the second half of the run (the
first half includes warm-up: allocator arenas, caches):

    python -m benchmarks.soak --seconds 600          # ten minutes
    python -m benchmarks.soak --seconds 60 --json    # machine-readable

tests/reliability/test_load.py runs :func:`soak` for 15 s and checks the slopes.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

import numpy as np
import psutil

from conveyor.testing import run_server


def soak(seconds: float, clients: int = 4, extra_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run the soak; return samples, request counts and slopes (bytes/s, fds/s)."""
    import http.client

    body = json.dumps(
        {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]}
    ).encode()
    stop = threading.Event()
    # Each client's connection is open (its first answer read) before the first sample, so
    # the descriptors compared are those of the same connected clients.
    answered_once = threading.Semaphore(0)
    counts = {"ok": 0, "failed": 0}
    lock = threading.Lock()
    with run_server(extra_args=list(extra_args)) as server:
        process = psutil.Process(server.process.pid)

        def client() -> None:
            connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
            ok = failed = 0
            while not stop.is_set():
                try:
                    connection.request("POST", "/v2/models/tiny/infer", body)
                    response = connection.getresponse()
                    response.read()
                    if response.status == 200:
                        ok += 1
                        if ok == 1:
                            answered_once.release()
                    else:
                        failed += 1
                except OSError:
                    failed += 1
                    connection.close()
                    connection = http.client.HTTPConnection(
                        "127.0.0.1", server.http_port, timeout=10
                    )
            connection.close()
            with lock:
                counts["ok"] += ok
                counts["failed"] += failed

        threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for _ in threads:
            answered_once.acquire(timeout=30)
        samples: list[tuple[float, int, int]] = []
        started = time.monotonic()
        while (now := time.monotonic()) - started < seconds:
            samples.append((now - started, process.memory_info().rss, process.num_fds()))
            time.sleep(1.0)
        stop.set()
        for thread in threads:
            thread.join(15)
        exit_code = server.stop()
    return {
        "seconds": seconds,
        "clients": clients,
        "requests_ok": counts["ok"],
        "requests_failed": counts["failed"],
        "requests_per_second": counts["ok"] / seconds,
        "rss_mb_first": samples[0][1] / 2**20,
        "rss_mb_last": samples[-1][1] / 2**20,
        "fds_first": samples[0][2],
        "fds_last": samples[-1][2],
        "rss_slope_bytes_per_s": second_half_slope(samples, 1),
        "fds_slope_per_s": second_half_slope(samples, 2),
        "exit_code": exit_code,
        "samples": samples,
    }


def second_half_slope(samples: list[tuple[float, int, int]], column: int) -> float:
    """Least-squares slope over the second half of the samples."""
    half = samples[len(samples) // 2 :]
    if len(half) < 2:
        return 0.0
    t = np.array([s[0] for s in half])
    y = np.array([s[column] for s in half], dtype=np.float64)
    return float(np.polyfit(t, y, 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=300.0,
        help="how long the load runs (a slope needs a minute or more)",
    )
    parser.add_argument("--clients", type=int, default=4, help="closed-loop HTTP clients on tiny")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = soak(args.seconds, args.clients)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['requests_ok']} requests ok, {result['requests_failed']} failed, "
        f"{result['requests_per_second']:.0f}/s over {args.seconds:.0f} s, "
        f"{args.clients} clients\n"
        f"RSS {result['rss_mb_first']:.1f} -> {result['rss_mb_last']:.1f} MiB, slope "
        f"{result['rss_slope_bytes_per_s'] / 1024:.2f} KiB/s (second half)\n"
        f"fds {result['fds_first']} -> {result['fds_last']}, slope "
        f"{result['fds_slope_per_s']:.3f}/s; server exit code {result['exit_code']}"
    )


if __name__ == "__main__":
    main()
