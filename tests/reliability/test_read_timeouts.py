"""Slow senders and over-limit bodies against the HTTP front end, on both of its ports.

The V2 port and the metrics port run the same front end (``conveyor/server/http/
connection.py``) with the same header and body read timeouts (``test_clients.py`` has
more). A real ``conveyor serve`` with 1 s timeouts, raw sockets on 127.0.0.1, a bound on
every socket operation.
"""

from __future__ import annotations

import concurrent.futures
import socket
import time
from collections.abc import Iterator

import pytest

from conveyor.testing import RunningServer, run_server
from tests.reliability.rel_util import build_repository, raw_exchange, read_until_closed

pytestmark = pytest.mark.alone  # measures rate, time or memory: run after the parallel part

TIMEOUT = 1.0  # the server's header and body timeouts here
KEEP_ALIVE = 4.0  # long enough to tell "closed after the answer" from "closed when idle"
LIMIT = 64 * 1024  # --max-body-bytes
SLACK = 2.0  # a busy 2-core CI machine
SOCKET_TIMEOUT = 10.0  # no socket operation here waits longer than this

READY = b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
INFER_HEAD = b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    repository = build_repository(tmp_path_factory.mktemp("read-timeouts"))
    args = [
        "--http-header-timeout", str(TIMEOUT),
        "--http-body-timeout", str(TIMEOUT),
        "--http-keep-alive-timeout", str(KEEP_ALIVE),
        "--max-body-bytes", str(LIMIT),
    ]  # fmt: skip
    with run_server(repository, extra_args=args) as running:
        yield running
        assert running.process.poll() is None, running.output()


def dribble(port: int, parts: list[bytes], gap: float) -> tuple[bytes, float, float]:
    """Send ``parts`` ``gap`` s apart, then stall. Returns what came back, the seconds from
    the first byte to the server closing, and the seconds from the last byte sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT) as sock:
        started = last = time.monotonic()
        for i, part in enumerate(parts):
            if i:
                time.sleep(gap)
            try:
                sock.sendall(part)
            except OSError:
                break  # already cut off
            last = time.monotonic()
        received = read_until_closed(sock)
        closed = time.monotonic()
    return received, closed - started, closed - last


def good_request(port: int) -> float:
    """A good request on its own connection; returns its latency."""
    started = time.monotonic()
    answer = raw_exchange(port, READY.replace(b"Host: x", b"Host: x\r\nConnection: close"))
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    return time.monotonic() - started


def assert_cut_off(received: bytes, what: bytes) -> None:
    assert received.startswith(b"HTTP/1.1 408"), received[:300]
    assert b"its " + what + b" stalled for more than 1 s" in received, received
    assert b"connection: close" in received


BYTE_BY_BYTE_HEAD = [bytes([c]) for c in b"GET /v2/health/ready HTTP/1.1\r\nX-Slow: aaaaaaaaaa"]


def test_a_slowloris_head_is_cut_off_within_the_header_timeout(server: RunningServer) -> None:
    # A byte every 0.2 s keeps the connection busy but the head never ends: the header
    # timeout counts from its first byte, so steady trickling does not extend it.
    received, took, _ = dribble(server.http_port, BYTE_BY_BYTE_HEAD, 0.2)
    assert_cut_off(received, b"headers")
    assert TIMEOUT - 0.1 <= took < TIMEOUT + SLACK, took
    good_request(server.http_port)


def test_a_half_sent_head_is_cut_off(server: RunningServer) -> None:
    received, took, _ = dribble(server.http_port, [INFER_HEAD], 0.0)
    assert_cut_off(received, b"headers")
    assert TIMEOUT - 0.1 <= took < TIMEOUT + SLACK, took


def test_a_body_dribbled_then_stalled_is_cut_off_within_the_body_timeout(
    server: RunningServer,
) -> None:
    # Headers whole, then the body a byte at a time faster than the timeout (each byte
    # restarts it, as in the default implementation), then nothing: cut off one body
    # timeout after the last byte.
    head = INFER_HEAD + b"Content-Length: 100\r\n\r\n"
    received, took, since_last = dribble(server.http_port, [head] + [b"{"] * 4, 0.4)
    assert_cut_off(received, b"body")
    assert took >= 4 * 0.4, took  # the trickle itself was not cut off
    assert TIMEOUT - 0.1 <= since_last < TIMEOUT + SLACK, since_last
    good_request(server.http_port)


def test_a_chunked_body_that_stalls_is_cut_off(server: RunningServer) -> None:
    head = INFER_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    received, _, since_last = dribble(server.http_port, [head, b"1\r\n{\r\n"], 0.2)
    assert_cut_off(received, b"body")
    assert TIMEOUT - 0.1 <= since_last < TIMEOUT + SLACK, since_last


def test_good_requests_are_answered_while_slow_senders_hang(server: RunningServer) -> None:
    body_head = INFER_HEAD + b"Content-Length: 100\r\n\r\n{"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        slow = [
            pool.submit(dribble, server.http_port, BYTE_BY_BYTE_HEAD[:30], 0.05),
            pool.submit(dribble, server.http_port, [INFER_HEAD], 0.0),
            pool.submit(dribble, server.http_port, [body_head], 0.0),
            pool.submit(dribble, server.http_port, [body_head, b'"'], 0.3),
        ]
        time.sleep(0.3)  # all four are connected and stalled by now
        latencies = [good_request(server.http_port) for _ in range(5)]
        assert not any(f.done() for f in slow), "slow senders were cut off too early"
        results = [f.result(timeout=TIMEOUT + 2 * SLACK + 2) for f in slow]
    assert max(latencies) < 1.0, latencies
    expected = [b"headers", b"headers", b"body", b"body"]
    for (received, _, _), what in zip(results, expected, strict=True):
        assert_cut_off(received, what)


def chunked(size: int, pieces: int) -> bytes:
    chunk = b"x" * size
    return b"".join(b"%x\r\n%s\r\n" % (size, chunk) for _ in range(pieces))


def test_a_chunked_body_over_the_limit_is_refused_and_the_connection_closed(
    server: RunningServer,
) -> None:
    # The whole over-limit body, terminator included: the server must not keep the
    # connection for another request (it used to answer and then wait for one).
    request = INFER_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(8192, 10) + b"0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=SOCKET_TIMEOUT) as sock:
        started = time.monotonic()
        sock.sendall(request)
        received = read_until_closed(sock)
        took = time.monotonic() - started
    assert received.startswith(b"HTTP/1.1 400"), received[:300]
    assert b"more than %d bytes" % LIMIT in received and b"connection: close" in received
    assert took < KEEP_ALIVE - 1, took  # closed after the answer, not by the idle timeout
    good_request(server.http_port)


def test_a_chunked_body_that_goes_on_past_the_limit_stops_being_read(
    server: RunningServer,
) -> None:
    # Past the limit the client keeps sending; the server answers and closes instead of
    # reading (and dropping) the rest.
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=SOCKET_TIMEOUT) as sock:
        sock.sendall(INFER_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(8192, 10))
        started = time.monotonic()
        received = b""
        refused = False
        while time.monotonic() - started < SOCKET_TIMEOUT:
            try:
                sock.sendall(chunked(1024, 1))
                chunk = sock.recv(65536) if received == b"" else b""
            except (BrokenPipeError, ConnectionResetError):
                refused = True
                break
            received += chunk
            time.sleep(0.05)
        took = time.monotonic() - started
    assert refused, "the server kept reading the body"
    assert received.startswith(b"HTTP/1.1 400"), received[:300]
    assert took < SLACK, took


def test_a_connection_that_never_sends_is_closed_after_the_keep_alive_timeout(
    server: RunningServer,
) -> None:
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=SOCKET_TIMEOUT) as sock:
        started = time.monotonic()
        assert read_until_closed(sock) == b""
        took = time.monotonic() - started
    assert KEEP_ALIVE - 0.1 <= took < KEEP_ALIVE + SLACK, took


def test_the_metrics_port_has_the_read_timeouts_too(server: RunningServer) -> None:
    # The metrics port runs the same front end, so a slow sender cannot hold it either.
    head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
    received, took, _ = dribble(server.metrics_port, [head], 0.0)
    assert_cut_off(received, b"headers")
    assert TIMEOUT - 0.1 <= took < TIMEOUT + SLACK, took
