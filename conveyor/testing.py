"""Helpers for testing against a real Conveyor server process (public API).

>>> from conveyor.testing import run_server
>>> with run_server("path/to/repo") as server:
...     client = tritonclient.http.InferenceServerClient(server.http_url.removeprefix("http://"))

The server runs as ``python -m conveyor serve`` in a subprocess on 127.0.0.1 with free
ports. ``run_server`` returns once ``/v2/health/ready`` answers 200 (polled, bounded), and
on exit sends SIGTERM and waits for the process (bounded), killing it if it hangs. Nothing
waits on log lines or fixed ports.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import typing
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["RunningServer", "ServerFailed", "free_port", "run_server", "wait_ready"]


class ServerFailed(RuntimeError):
    """The server process exited, or did not become ready in time."""


# Ports this process handed out lately. The OS may offer the port it just released again,
# so two calls in a row (say the HTTP and the gRPC port of one server) could otherwise
# name the same port, and the second listener would fail to bind.
_RECENT_PORTS: collections.deque[int] = collections.deque(maxlen=512)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (the OS picks it).

    Never one this process handed out among its last few hundred calls.
    """
    for _ in range(64):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _RECENT_PORTS:
            _RECENT_PORTS.append(port)
            return port
    raise RuntimeError(f"the OS kept offering ports this process already handed out on {host}")


@dataclasses.dataclass
class RunningServer:
    process: subprocess.Popen[bytes]
    http_port: int
    grpc_port: int
    metrics_port: int
    host: str = "127.0.0.1"
    log: typing.IO[bytes] | None = None
    tls: bool = False

    @property
    def http_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"grpc://{self.host}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.metrics_port}/metrics"

    def output(self) -> str:
        """What the server has written to stdout/stderr so far."""
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait up to ``timeout`` s (then SIGKILL); returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return int(self.process.returncode)


def wait_ready(
    url: str,
    timeout: float,
    process: subprocess.Popen[bytes] | None = None,
    *,
    ssl_context: ssl.SSLContext | None = None,
) -> None:
    """Poll ``{url}/v2/health/ready`` until it answers 200; ServerFailed after ``timeout``.

    ``ssl_context`` verifies an https server (e.g. one trusting a test's own certificate).
    """
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServerFailed(f"server exited with code {process.returncode} before ready")
        try:
            with urllib.request.urlopen(
                f"{url}/v2/health/ready", timeout=2, context=ssl_context
            ) as response:
                if response.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except OSError as exc:
            last = str(exc)
        time.sleep(0.05)
    raise ServerFailed(f"server at {url} not ready within {timeout} s (last: {last})")


# How often run_server starts again on new ports when one it chose was taken meanwhile.
_START_ATTEMPTS = 3
_BIND_FAILED = "Address already in use"


@contextlib.contextmanager
def run_server(
    repository: str | os.PathLike[str] | None = None,
    *,
    http_port: int | None = None,
    grpc_port: int | None = None,
    metrics_port: int | None = None,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    ready_timeout: float = 60.0,
    wait: bool = True,
    ssl_context: ssl.SSLContext | None = None,
) -> Iterator[RunningServer]:
    """Start ``conveyor serve`` in a subprocess; yield it once ready; stop it on exit.

    ``wait=False`` yields as soon as the process started (for tests of startup itself).
    For a server started with ``--tls-cert``/``--tls-key`` pass ``ssl_context``, a client
    context that trusts that certificate: readiness is then polled over https.
    """
    # A port chosen here may be taken by another process before the server binds it; then
    # the start is retried on new ports (bounded). Ports the caller chose are never changed.
    chosen_here = http_port is None or grpc_port is None or metrics_port is None
    for attempt in range(1, _START_ATTEMPTS + 1):
        server = _start_server(
            repository,
            http_port or free_port(),
            grpc_port or free_port(),
            metrics_port or free_port(),
            extra_args,
            env,
            tls=ssl_context is not None,
        )
        if not wait:
            break
        try:
            wait_ready(server.http_url, ready_timeout, server.process, ssl_context=ssl_context)
            break
        except ServerFailed as exc:
            server.stop(5)
            output = server.output()
            if server.log is not None:
                server.log.close()
            if chosen_here and attempt < _START_ATTEMPTS and _BIND_FAILED in output:
                continue
            raise ServerFailed(f"{exc}\n--- server output ---\n{output}") from None
    try:
        yield server
    finally:
        server.stop()
        if server.log is not None:
            server.log.close()


def _start_server(
    repository: str | os.PathLike[str] | None,
    http_port: int,
    grpc_port: int,
    metrics_port: int,
    extra_args: Sequence[str],
    env: Mapping[str, str] | None,
    *,
    tls: bool,
) -> RunningServer:
    command = [
        sys.executable, "-m", "conveyor", "serve",
        *([os.fspath(repository)] if repository is not None else []),
        "--host", "127.0.0.1",
        "--http-port", str(http_port),
        "--grpc-port", str(grpc_port),
        "--metrics-port", str(metrics_port),
        *extra_args,
    ]  # fmt: skip
    child_env = dict(os.environ if env is None else env)
    # The child imports this very conveyor, wherever it was imported from.
    package_root = str(Path(__file__).resolve().parent.parent)
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, child_env.get("PYTHONPATH")) if p
    )
    # A file, not a pipe: a chatty server must never block on a full pipe.
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by run_server)
    process = subprocess.Popen(command, env=child_env, stdout=log, stderr=subprocess.STDOUT)
    return RunningServer(process, http_port, grpc_port, metrics_port, log=log, tls=tls)
