"""A burst of new connections waits in the listen backlog (``--backlog``) for the server.

The kernel completes a TCP handshake into a listener's accept queue, up to its backlog,
without the server doing anything. Past it, Linux drops the client's SYN and the client
retries a second later (then 3 s, 7 s, ...). Here the server process is stopped
(SIGSTOP), so it accepts nothing while 1,000 clients connect at once: with the default
backlog (2048) every handshake completes at once, and once the server runs again every
client is answered; with a small one, most of the burst is left waiting. Both the V2 port
and the metrics port are checked.
"""

from __future__ import annotations

import selectors
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.testing import RunningServer, run_server
from tests.reliability.rel_util import build_repository

BURST = 1000
SMALL_BACKLOG = 64
# Far less than the SYN retries a dropped client would need, and far more than 1,000
# loopback handshakes take on a busy machine.
HANDSHAKES_WITHIN = 5.0
SOCKET_TIMEOUT = 20.0
PING = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
METRICS = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def somaxconn() -> int:
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except OSError:
        return 0


pytestmark = [
    pytest.mark.skipif(
        somaxconn() < BURST,
        reason=f"needs Linux with net.core.somaxconn >= {BURST} (it caps every backlog)",
    ),
    pytest.mark.alone,
]


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("backlog"))


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    with run_server(repository) as running:  # the default --backlog
        yield running
        assert running.process.poll() is None, running.output()


def connect_burst(port: int) -> tuple[list[socket.socket], int]:
    """Start ``BURST`` connects at once; return the sockets and how many handshakes
    completed within ``HANDSHAKES_WITHIN`` seconds."""
    sockets = []
    with selectors.DefaultSelector() as selector:
        for _ in range(BURST):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
            sockets.append(sock)
            selector.register(sock, selectors.EVENT_WRITE)
        connected = 0
        pending = BURST
        deadline = time.monotonic() + HANDSHAKES_WITHIN
        while pending and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                selector.unregister(key.fileobj)
                pending -= 1
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                assert error == 0, f"a connect failed: {error}"
                connected += 1
    return sockets, connected


def stopped_while_connecting(server: RunningServer, port: int) -> tuple[list[socket.socket], int]:
    server.process.send_signal(signal.SIGSTOP)
    try:
        return connect_burst(port)
    finally:
        server.process.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("port_name", ["http_port", "metrics_port"])
def test_a_burst_of_connections_waits_in_the_backlog_and_is_answered(
    server: RunningServer, port_name: str
) -> None:
    port = getattr(server, port_name)
    request = METRICS if port_name == "metrics_port" else PING
    sockets, connected = stopped_while_connecting(server, port)
    try:
        assert connected == BURST, f"{BURST - connected} of {BURST} handshakes were dropped"
        for sock in sockets:
            sock.setblocking(True)
            sock.settimeout(SOCKET_TIMEOUT)
            sock.sendall(request)
        for sock in sockets:
            answer = sock.recv(12)
            assert answer == b"HTTP/1.1 200", answer
    finally:
        for sock in sockets:
            sock.close()


def test_the_backlog_setting_reaches_both_listeners(repository: Path) -> None:
    # The same burst against --backlog 64: most handshakes wait for SYN retries.
    with run_server(repository, extra_args=["--backlog", str(SMALL_BACKLOG)]) as small:
        for port in (small.http_port, small.metrics_port):
            sockets, connected = stopped_while_connecting(small, port)
            for sock in sockets:
                sock.close()
            assert connected < BURST // 2, (port, connected)
        assert small.process.poll() is None, small.output()
