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


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


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
    ports = {
        "http": http_port or free_port(),
        "grpc": grpc_port or free_port(),
        "metrics": metrics_port or free_port(),
    }
    command = [
        sys.executable, "-m", "conveyor", "serve",
        *([os.fspath(repository)] if repository is not None else []),
        "--host", "127.0.0.1",
        "--http-port", str(ports["http"]),
        "--grpc-port", str(ports["grpc"]),
        "--metrics-port", str(ports["metrics"]),
        *extra_args,
    ]  # fmt: skip
    child_env = dict(os.environ if env is None else env)
    # The child imports this very conveyor, wherever it was imported from.
    package_root = str(Path(__file__).resolve().parent.parent)
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, child_env.get("PYTHONPATH")) if p
    )
    # A file, not a pipe: a chatty server must never block on a full pipe.
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in the finally below)
    process = subprocess.Popen(command, env=child_env, stdout=log, stderr=subprocess.STDOUT)
    server = RunningServer(
        process,
        ports["http"],
        ports["grpc"],
        ports["metrics"],
        log=log,
        tls=ssl_context is not None,
    )
    try:
        if wait:
            try:
                wait_ready(server.http_url, ready_timeout, process, ssl_context=ssl_context)
            except ServerFailed as exc:
                server.stop(5)
                raise ServerFailed(f"{exc}\n--- server output ---\n{server.output()}") from None
        yield server
    finally:
        server.stop()
        log.close()
