"""Hostile soak: legitimate HTTP and gRPC load while hostile clients attack; do the server's
memory and descriptors stay flat, and are the legitimate clients served throughout?

Starts ``conveyor serve`` (built-in examples) on loopback with short timeouts, so abandoned
connections are reaped within the run (``--grpc-send-timeout 2 --grpc-handshake-timeout 2
--http-header-timeout 2``). Closed-loop clients call ``tiny``: ``--http-clients`` with
``http.client``, ``--grpc-clients`` with tritonclient's gRPC ``infer``. Meanwhile
``--attackers`` threads each cycle through the attacks of :mod:`benchmarks.hostile_attacks`
(rapid reset, a PING flood never read, streams opened and left, a silent connection, gzip
messages that inflate 1000x left open, a 4 MiB message of zeros, a WINDOW_UPDATE of 0,
SETTINGS on a stream, a slow HTTP/1.1 head), each on a fresh connection, with
``--pause`` seconds between two attacks so the legitimate clients keep most of the CPU.
The server's RSS and descriptor count are sampled once a second, and the least-squares
slope of each is taken over the second half of the run (the first half holds warm-up)::

    python -m benchmarks.hostile_soak --seconds 600
    python -m benchmarks.hostile_soak --seconds 120 --grpc-transport grpcio --json

The run lasts ``--seconds`` and, past that, until every attack has run once (at most 60 s
more). Flat means: RSS slope under 1 MiB a minute and descriptor slope under 0.01 a second.
1 MiB a minute is what 6 KiB kept per attack (about 3 attacks a second) or 8 bytes kept per
legitimate request (about 2,000 a second here) would show; the descriptor bound is three
descriptors gained over a 300 s second half, when one leaked connection per attack would
be hundreds. The exit code is 1 if either slope is over its bound or a legitimate request
failed other than by explicit overload (HTTP 503, gRPC UNAVAILABLE).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import sys
import threading
import time
from typing import Any

import numpy as np
import psutil

from benchmarks.hostile_attacks import H2_ATTACKS, HTTP_ATTACKS
from benchmarks.soak import second_half_slope
from conveyor.testing import RunningServer, run_server

RSS_BOUND_BYTES_PER_S = 1024 * 1024 / 60  # 1 MiB a minute
FDS_BOUND_PER_S = 0.01
# A short run's second half is a few samples, whose slope one descriptor or one burst
# swings past the bounds: growth within these, first sample to last, is flat too. A real
# leak over minutes grows past them.
RSS_SLACK_BYTES = 8 * 1024 * 1024
FDS_SLACK = 2
SERVER_ARGS = (
    "--grpc-send-timeout", "2", "--grpc-handshake-timeout", "2", "--http-header-timeout", "2",
)  # fmt: skip
TINY_BODY = json.dumps(
    {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]}
).encode()


class Tally:
    """Counts shared by the client threads (each adds its own under the lock at the end)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[str, collections.Counter[str]] = {
            "http": collections.Counter(),
            "grpc": collections.Counter(),
        }
        self.failures: list[str] = []  # the first few, to say why
        self.attacks: dict[str, collections.Counter[str]] = {
            name: collections.Counter() for name in (*H2_ATTACKS, *HTTP_ATTACKS)
        }
        # The attacks under way, so a failure says which attacks it met.
        self.running: collections.Counter[str] = collections.Counter()

    def fail(self, protocol: str, overloaded: bool, why: str) -> None:
        with self.lock:
            self.requests[protocol]["overloaded" if overloaded else "failed"] += 1
            if not overloaded and len(self.failures) < 10:
                during = ", ".join(sorted(self.running)) or "no attack"
                self.failures.append(f"{protocol}: {why} (during: {during})")

    def attacks_run(self) -> int:
        with self.lock:
            return min(sum(outcomes.values()) for outcomes in self.attacks.values())


def _http_client(server: RunningServer, stop: threading.Event, tally: Tally) -> None:
    import http.client

    def connect() -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)

    connection, ok = connect(), 0
    while not stop.is_set():
        try:
            connection.request("POST", "/v2/models/tiny/infer", TINY_BODY)
            response = connection.getresponse()
            answer = response.read()
        except OSError as exc:
            tally.fail("http", False, repr(exc))
            connection.close()
            connection = connect()
            continue
        if response.status == 200:
            ok += 1
        else:
            tally.fail("http", response.status == 503, f"{response.status} {answer[:200]!r}")
    connection.close()
    with tally.lock:
        tally.requests["http"]["ok"] += ok


def _grpc_client(server: RunningServer, stop: threading.Event, tally: Tally) -> None:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    x = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    x.set_data_from_numpy(np.full((1, 16), 0.5, np.float32))
    ok = 0
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        while not stop.is_set():
            try:
                result = client.infer("tiny", [x], client_timeout=10)
            except InferenceServerException as exc:
                tally.fail("grpc", exc.status() == "StatusCode.UNAVAILABLE", str(exc)[:200])
                continue
            if result.as_numpy("OUTPUT0") is not None:
                ok += 1
            else:
                tally.fail("grpc", False, "no OUTPUT0 in the answer")
    with tally.lock:
        tally.requests["grpc"]["ok"] += ok


def _attacker(
    index: int, server: RunningServer, stop: threading.Event, tally: Tally, pause: float
) -> None:
    kinds = [(name, attack, server.grpc_port) for name, attack in H2_ATTACKS.items()]
    kinds += [(name, attack, server.http_port) for name, attack in HTTP_ATTACKS.items()]
    # Attackers start at different places in the cycle, so every kind runs early on.
    start = index * len(kinds) // 3
    for name, attack, port in itertools.islice(itertools.cycle(kinds), start, None):
        if stop.is_set():
            return
        with tally.lock:
            tally.running[name] += 1
        try:
            outcome = attack(port)
        except OSError as exc:
            outcome = f"client error {type(exc).__name__}"
        with tally.lock:
            tally.attacks[name][outcome] += 1
            tally.running[name] -= 1
            if not tally.running[name]:
                del tally.running[name]
        stop.wait(pause)


def hostile_soak(
    seconds: float,
    *,
    http_clients: int = 2,
    grpc_clients: int = 2,
    attackers: int = 2,
    pause: float = 0.3,
    grpc_transport: str = "conveyor",
) -> dict[str, Any]:
    """Run the soak; return counts, samples, slopes and whether it was flat."""
    tally = Tally()
    stop_clients, stop_attacks = threading.Event(), threading.Event()
    extra_args = [*SERVER_ARGS, "--grpc-transport", grpc_transport]
    with run_server(extra_args=extra_args) as server:
        process = psutil.Process(server.process.pid)
        fds_idle_before = process.num_fds()
        clients = [
            threading.Thread(target=_http_client, args=(server, stop_clients, tally), daemon=True)
            for _ in range(http_clients)
        ] + [
            threading.Thread(target=_grpc_client, args=(server, stop_clients, tally), daemon=True)
            for _ in range(grpc_clients)
        ]
        hostile = [
            threading.Thread(
                target=_attacker, args=(i, server, stop_attacks, tally, pause), daemon=True
            )
            for i in range(attackers)
        ]
        for thread in clients + hostile:
            thread.start()
        time.sleep(2.0)  # the clients connected: the first sample counts their descriptors
        samples: list[tuple[float, int, int]] = []
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < seconds or (
            tally.attacks_run() == 0 and elapsed < seconds + 60
        ):
            samples.append((elapsed, process.memory_info().rss, process.num_fds()))
            time.sleep(1.0)
        elapsed = time.monotonic() - started
        stop_attacks.set()
        for thread in hostile:
            thread.join(30)
        stop_clients.set()
        for thread in clients:
            thread.join(30)
        time.sleep(3.0)  # past the 2 s timeouts: connections left by attacks are reaped
        fds_idle_after = process.num_fds()
        exit_code = server.stop()
        output = server.output()
    rss_slope, fds_slope = second_half_slope(samples, 1), second_half_slope(samples, 2)
    failed = sum(counts["failed"] for counts in tally.requests.values())
    rss_grown = samples[-1][1] - samples[0][1] if samples else 0
    fds_grown = samples[-1][2] - samples[0][2] if samples else 0
    flat = (rss_slope < RSS_BOUND_BYTES_PER_S or rss_grown <= RSS_SLACK_BYTES) and (
        abs(fds_slope) < FDS_BOUND_PER_S or abs(fds_grown) <= FDS_SLACK
    )
    return {
        "seconds": elapsed,
        "grpc_transport": grpc_transport,
        "http_clients": http_clients,
        "grpc_clients": grpc_clients,
        "attackers": attackers,
        "requests": {
            protocol: {
                "ok": counts["ok"],
                "failed": counts["failed"],
                "overloaded": counts["overloaded"],
                "per_second": counts["ok"] / elapsed,
            }
            for protocol, counts in tally.requests.items()
        },
        "failures": tally.failures,
        "attacks": {name: dict(outcomes) for name, outcomes in tally.attacks.items()},
        "rss_mb_first": samples[0][1] / 2**20,
        "rss_mb_last": samples[-1][1] / 2**20,
        "rss_mb_max": max(sample[1] for sample in samples) / 2**20,
        "rss_slope_bytes_per_s": rss_slope,
        "fds_first": samples[0][2],
        "fds_last": samples[-1][2],
        "fds_max": max(sample[2] for sample in samples),
        "fds_slope_per_s": fds_slope,
        "fds_idle_before": fds_idle_before,
        "fds_idle_after": fds_idle_after,
        "flat": flat,
        "passed": flat and failed == 0,
        "exit_code": exit_code,
        "server_tracebacks": output.count("Traceback"),
        "samples": samples,
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['seconds']:.0f} s, gRPC transport {result['grpc_transport']}, "
        f"{result['http_clients']} HTTP + {result['grpc_clients']} gRPC clients, "
        f"{result['attackers']} attackers"
    ]
    for protocol, counts in result["requests"].items():
        lines.append(
            f"{protocol}: {counts['ok']} ok, {counts['failed']} failed, "
            f"{counts['overloaded']} overloaded, {counts['per_second']:.0f}/s"
        )
    lines += [f"  failure: {why}" for why in result["failures"]]
    lines.append(
        f"RSS {result['rss_mb_first']:.1f} -> {result['rss_mb_last']:.1f} MiB "
        f"(max {result['rss_mb_max']:.1f}), slope "
        f"{result['rss_slope_bytes_per_s'] / 1024:.2f} KiB/s (second half)"
    )
    lines.append(
        f"fds {result['fds_first']} -> {result['fds_last']} (max {result['fds_max']}), slope "
        f"{result['fds_slope_per_s']:.4f}/s; idle {result['fds_idle_before']} before, "
        f"{result['fds_idle_after']} after"
    )
    for name, outcomes in result["attacks"].items():
        ended = ", ".join(f"{outcome} x{count}" for outcome, count in sorted(outcomes.items()))
        lines.append(f"attack {name}: {sum(outcomes.values())} ({ended})")
    lines.append(
        f"server exit code {result['exit_code']}, {result['server_tracebacks']} tracebacks"
    )
    verdict = "PASS" if result["passed"] else "FAIL"
    lines.append(
        f"{verdict}: flat={result['flat']} (RSS slope < 1 MiB/min or grown <= "
        f"{RSS_SLACK_BYTES >> 20} MiB, |fd slope| < {FDS_BOUND_PER_S}/s or changed by <= "
        f"{FDS_SLACK}), legit failures (not overload) = "
        f"{sum(counts['failed'] for counts in result['requests'].values())}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=600.0,
        help="how long the load and the attacks run",
    )
    parser.add_argument(
        "--http-clients", type=int, default=2, help="closed-loop HTTP clients on tiny"
    )
    parser.add_argument(
        "--grpc-clients", type=int, default=2, help="closed-loop tritonclient gRPC clients on tiny"
    )
    parser.add_argument(
        "--attackers",
        type=int,
        default=2,
        help="attackers, each cycling through the hostile clients",
    )
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between attacks")
    parser.add_argument(
        "--grpc-transport",
        choices=("conveyor", "grpcio"),
        default="conveyor",
        help="the server's gRPC transport (conveyor serve --grpc-transport)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = hostile_soak(
        args.seconds,
        http_clients=args.http_clients,
        grpc_clients=args.grpc_clients,
        attackers=args.attackers,
        pause=args.pause,
        grpc_transport=args.grpc_transport,
    )
    print(json.dumps(result) if args.json else report(result), flush=True)
    sys.exit(0 if result["passed"] else 1)


if __name__ == "__main__":
    main()
