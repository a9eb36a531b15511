"""The engine process's supervisor of its front-end processes.

:class:`FrontEndPool` is one of the server's front ends (``start``/``stop``): it opens the
HTTP listening socket once (every front-end process inherits it, so the kernel's one
accept queue feeds whichever process is free, and the port stays open while a process is
replaced), reserves the gRPC port (each process binds it with SO_REUSEPORT, as grpc does by
default), starts ``count`` processes, and replaces one that dies. On stop it sends each
SIGTERM, so they drain, and waits for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

from conveyor.server.frontend import bind
from conveyor.server.workers.host import FrontEndLink
from conveyor.server.workers.launch import Launch

if TYPE_CHECKING:
    from conveyor.server.dataplane import DataPlane
    from conveyor.server.settings import Settings

log = logging.getLogger("conveyor.server.workers")

# A process that dies at once would otherwise be restarted in a tight loop: wait, doubling
# the wait for each death in a row up to the cap; a process that lived a while resets it.
RESTART_DELAY_S = 0.5
RESTART_DELAY_CAP_S = 10.0
HEALTHY_AFTER_S = 10.0
# After the drain: how long a front-end process may take to exit before it is killed.
EXIT_GRACE_S = 5.0


class FrontEndPool:
    """``count`` front-end processes serving HTTP and gRPC over ``data`` (this process's)."""

    name = "workers"

    def __init__(self, data: DataPlane, settings: Settings, count: int) -> None:
        self._data = data
        self._settings = settings
        self.count = count
        self._http: socket.socket | None = None
        self._grpc_reservation: socket.socket | None = None
        self.grpc_port = settings.grpc_port
        self.processes: list[asyncio.subprocess.Process | None] = [None] * count
        self._links: list[FrontEndLink | None] = [None] * count
        self._watchers: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.restarts = 0
        self._delays = [RESTART_DELAY_S / 2] * count

    @property
    def url(self) -> str:
        port = self._http.getsockname()[1] if self._http is not None else self._settings.http_port
        return f"http://{self._settings.host}:{port} and grpc port {self.grpc_port}"

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p is not None]

    async def start(self) -> None:
        s = self._settings
        self._http = bind(s.host, s.http_port, "HTTP")
        self._http.listen(s.backlog)
        self._grpc_reservation = _reserve_reuseport(s.host, s.grpc_port)
        self.grpc_port = self._grpc_reservation.getsockname()[1]
        for index in range(self.count):
            await self._spawn(index)
        noun = "front-end process" if self.count == 1 else "front-end processes"
        log.info("%d %s serving %s", self.count, noun, self.url)

    async def _spawn(self, index: int) -> None:
        assert self._http is not None
        control_here, control_there = socket.socketpair()
        calls_here, calls_there = socket.socketpair()
        launch = Launch(
            settings=self._settings,
            index=index,
            http_fd=self._http.fileno(),
            control_fd=control_there.fileno(),
            calls_fd=calls_there.fileno(),
            grpc_port=self.grpc_port,
            log_level=logging.getLogger().level,
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "conveyor.server.workers.process",
            stdin=subprocess.PIPE,
            pass_fds=(launch.http_fd, launch.control_fd, launch.calls_fd),
        )
        control_there.close()
        calls_there.close()
        assert process.stdin is not None
        process.stdin.write(pickle.dumps(launch))
        await process.stdin.drain()
        process.stdin.close()
        link = FrontEndLink(self._data, control_here, calls_here, f"front end {index}")
        link.start()
        self.processes[index] = process
        self._links[index] = link
        watcher = asyncio.get_running_loop().create_task(self._watch(index, process, link))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _watch(
        self, index: int, process: asyncio.subprocess.Process, link: FrontEndLink
    ) -> None:
        born = asyncio.get_running_loop().time()
        code = await process.wait()
        link.close()
        if self._stopping:
            return
        log.warning(
            "front end %d (pid %d) exited with %s; starting another",
            index,
            process.pid,
            _describe(code),
        )
        self.restarts += 1
        lived = asyncio.get_running_loop().time() - born
        self._delays[index] = (
            RESTART_DELAY_S
            if lived > HEALTHY_AFTER_S
            else min(RESTART_DELAY_CAP_S, self._delays[index] * 2)
        )
        await asyncio.sleep(self._delays[index])
        if not self._stopping:
            await self._spawn(index)

    async def stop(self, timeout: float) -> None:
        """SIGTERM every front-end process (each drains for up to ``timeout`` s); wait."""
        self._stopping = True
        running = [p for p in self.processes if p is not None and p.returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        waits = [asyncio.ensure_future(p.wait()) for p in running]
        if waits:
            _, late = await asyncio.wait(waits, timeout=timeout + EXIT_GRACE_S)
            for process in running:
                if process.returncode is None:
                    log.warning("front end pid %d did not exit in time; killing it", process.pid)
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
            if late:
                await asyncio.wait(late, timeout=EXIT_GRACE_S)
        for link in self._links:
            if link is not None:
                link.close()
        for watcher in list(self._watchers):
            watcher.cancel()
        for sock in (self._http, self._grpc_reservation):
            if sock is not None:
                sock.close()
        self._http = self._grpc_reservation = None


def _reserve_reuseport(host: str, port: int) -> socket.socket:
    """Hold ``port`` (bound with SO_REUSEPORT, never listening): no other program takes it
    while front-end processes come and go, and port 0 becomes one port they all share."""
    return bind(host, port, "gRPC", reuse=socket.SO_REUSEPORT)


def _describe(code: int) -> str:
    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


def default_count() -> int:
    """``--workers 0``: one front end per core this process may run on, at most 32."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(32, cores or 1))
