"""Clients that misbehave: slow senders, idle crowds, and clients that leave while queued.

The read timeouts are the httptools implementation's (the default); the server here runs
with 1 s timeouts so the tests take seconds.
"""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer, run_server
from tests.metrics import metric
from tests.models import RunLog
from tests.polling import wait_until
from tests.reliability.rel_util import build_repository, raw_exchange, run_log

pytestmark = pytest.mark.alone  # measures rate, time or memory: run after the parallel part

TIMEOUT = 1.0  # the server's header and body timeouts here
ADMIT = 8  # a few seconds of slack on a busy 2-core CI machine


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Path]]:
    repository = build_repository(tmp_path_factory.mktemp("clients"))
    args = [
        "--http-header-timeout", str(TIMEOUT),
        "--http-body-timeout", str(TIMEOUT),
        "--http-keep-alive-timeout", "6",
    ]  # fmt: skip
    with run_server(repository, extra_args=args) as server:
        yield server, repository
        assert server.process.poll() is None, server.output()


def infer_body(tag: str, seconds: float) -> bytes:
    return json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [seconds]},
                {"name": "TAG", "shape": [1], "datatype": "BYTES", "data": [tag]},
            ]
        }
    ).encode()


def post(tag: str, seconds: float = 0.0) -> bytes:
    body = infer_body(tag, seconds)
    return (
        b"POST /v2/models/runs/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def good_request(server: RunningServer) -> None:
    answer = raw_exchange(server.http_port, b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n"
                          b"Connection: close\r\n\r\n")  # fmt: skip
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]


def stalled(port: int, parts: list[bytes], gap: float = 0.0) -> tuple[bytes, float]:
    """Send ``parts`` (``gap`` s apart), then wait; return what came back and when it closed."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=ADMIT) as sock:
        for part in parts:
            try:
                sock.sendall(part)
            except OSError:
                break  # already cut off
            time.sleep(gap)
        received = b""
        while True:
            try:
                chunk = sock.recv(4096)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    return received, time.monotonic() - started


@pytest.mark.parametrize(
    "parts, gap, what",
    [
        ([b"POST /v2/models/runs/infer HTTP/1.1\r\nHost: x\r\n"], 0.0, b"headers"),
        ([b"GET /v2/health/ready HTTP/1.1\r\nHo"], 0.0, b"headers"),
        ([post("never")[:-10]], 0.0, b"body"),
        # Slowloris: a byte every 0.2 s keeps the connection busy but the head never ends.
        (
            [bytes([c]) for c in b"GET /v2/health/ready HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa"],
            0.2,
            b"headers",
        ),
    ],
    ids=["half-head", "cut-in-header", "half-body", "slowloris"],
)
def test_a_stalled_sender_gets_408_and_is_disconnected(
    served: tuple[RunningServer, Path], parts: list[bytes], gap: float, what: bytes
) -> None:
    server, _ = served
    received, took = stalled(server.http_port, parts, gap)
    assert received.startswith(b"HTTP/1.1 408"), received[:200]
    assert what in received and b"connection: close" in received
    # Timer ticks once a second: cut off between TIMEOUT and TIMEOUT + ~1 s (+ CI slack).
    assert TIMEOUT <= took < TIMEOUT + 3, took
    good_request(server)


def test_many_idle_and_half_open_connections_do_not_exhaust_it(
    served: tuple[RunningServer, Path],
) -> None:
    server, _ = served
    process = psutil.Process(server.process.pid)
    fds_before = process.num_fds()
    sockets = []
    try:
        for i in range(600):
            sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=ADMIT)
            if i % 3 == 0:
                sock.sendall(b"POST /v2/models/runs/infer HTTP/1.1\r\nContent-Length: 50\r\n")
            sockets.append(sock)
        # (the half-open third may already be cut off by the 1 s header timeout)
        wait_until(lambda: process.num_fds() >= fds_before + 400, 5, "connections accepted")
        # Good requests are served promptly while 600 connections sit there.
        latencies = []
        for _ in range(20):
            started = time.monotonic()
            good_request(server)
            latencies.append(time.monotonic() - started)
        assert max(latencies) < 1.0, latencies
        # The server closes them all: half-open ones by the read timeout, silent ones by
        # the keep-alive timeout (6 s here, so a busy machine still counts them all open);
        # its descriptors come back down.
        wait_until(lambda: process.num_fds() <= fds_before + 5, 15, "idle connections closed")
    finally:
        for sock in sockets:
            sock.close()
    good_request(server)


def queued_then_gone(server: RunningServer, repository: Path, leave) -> None:  # type: ignore[no-untyped-def]
    """A blocker runs; ``leave(tag)`` queues a request and abandons it; it must never run."""
    RunLog(repository, "runs").clear()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        blocker = pool.submit(raw_exchange, server.http_port, post("blocker", 1.5)
                              .replace(b"Host: x", b"Connection: close"))  # fmt: skip
        wait_until(lambda: "blocker" in run_log(repository), 10, "blocker running")
        leave("gone", lambda: metric(server, "nv_inference_pending_request_count", "runs") == 1)
        assert b"blocker" in blocker.result(10)
    answer = raw_exchange(server.http_port, post("after").replace(b"Host: x", b"Connection: close"))
    assert answer.startswith(b"HTTP/1.1 200")
    assert run_log(repository) == ["blocker", "after"]  # "gone" never ran
    assert metric(server, "nv_inference_pending_request_count", "runs") == 0


def test_an_http_client_that_disconnects_while_queued_frees_its_request(
    served: tuple[RunningServer, Path],
) -> None:
    server, repository = served

    def leave(tag: str, queued) -> None:  # type: ignore[no-untyped-def]
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=ADMIT) as sock:
            sock.sendall(post(tag))
            wait_until(queued, 10, "request queued")
        # closed here, while its request waits behind the blocker

    queued_then_gone(server, repository, leave)


def test_a_grpc_client_that_cancels_while_queued_frees_its_request(
    served: tuple[RunningServer, Path],
) -> None:
    server, repository = served
    address = server.grpc_url.removeprefix("grpc://")

    def leave(tag: str, queued) -> None:  # type: ignore[no-untyped-def]
        with grpcclient.InferenceServerClient(address) as client:
            seconds = grpcclient.InferInput("INPUT0", [1], "FP32")
            seconds.set_data_from_numpy(np.array([0.0], np.float32))
            label = grpcclient.InferInput("TAG", [1], "BYTES")
            label.set_data_from_numpy(np.array([tag.encode()], dtype=object))
            results: list = []
            call = client.async_infer(
                "runs", [seconds, label], lambda result, error: results.append(error)
            )
            wait_until(queued, 10, "request queued")
            call.cancel()
            wait_until(lambda: bool(results), 10, "cancellation delivered")
            assert "CANCELLED" in str(results[0])

    queued_then_gone(server, repository, leave)


def test_a_grpc_deadline_that_passes_while_queued_frees_its_request(
    served: tuple[RunningServer, Path],
) -> None:
    server, repository = served
    address = server.grpc_url.removeprefix("grpc://")

    def leave(tag: str, queued) -> None:  # type: ignore[no-untyped-def]
        with grpcclient.InferenceServerClient(address) as client:
            seconds = grpcclient.InferInput("INPUT0", [1], "FP32")
            seconds.set_data_from_numpy(np.array([0.0], np.float32))
            label = grpcclient.InferInput("TAG", [1], "BYTES")
            label.set_data_from_numpy(np.array([tag.encode()], dtype=object))
            with pytest.raises(InferenceServerException, match=r"(?i)deadline"):
                client.infer("runs", [seconds, label], client_timeout=0.5)

    queued_then_gone(server, repository, leave)
