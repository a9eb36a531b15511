"""The HTTP/1.1 listener: binds, accepts connections (:class:`HTTPProtocol`), keeps the
Date header fresh, closes idle keep-alive connections and stalled requests, and stops
gracefully."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Callable
from email.utils import formatdate

from conveyor.server.access_log import AccessLog
from conveyor.server.auth import OPEN_HTTP_PATHS, BearerAuth
from conveyor.server.frontend import bind, front_end_label
from conveyor.server.http.connection import (
    HTTPProtocol,
    InferRoutes,
    Routes,
    TracingSwitch,
    Untraced,
)
from conveyor.server.settings import (
    DEFAULT_HTTP_BODY_TIMEOUT_S,
    DEFAULT_HTTP_HEADER_TIMEOUT_S,
    DEFAULT_HTTP_KEEP_ALIVE_S,
    DEFAULT_LISTEN_BACKLOG,
)
from conveyor.server.stream_send import DEFAULT_STREAM_SEND_TIMEOUT_S

log = logging.getLogger("conveyor.http")

KEEP_ALIVE_SECONDS = DEFAULT_HTTP_KEEP_ALIVE_S
HEADER_TIMEOUT_SECONDS = DEFAULT_HTTP_HEADER_TIMEOUT_S
BODY_TIMEOUT_SECONDS = DEFAULT_HTTP_BODY_TIMEOUT_S
BACKLOG = DEFAULT_LISTEN_BACKLOG
# Where socket reads go while no body is read directly. One per front end: every read is
# parsed (and copied out by httptools' callbacks) before the next read, on the loop thread.
_SCRATCH_BYTES = 256 * 1024


class HTTPToolsFrontEnd:
    """An HTTP front end on :class:`HTTPProtocol`: listens, keeps the Date header fresh,
    closes idle keep-alive connections, and stops gracefully.

    ``auth`` (when given) guards every path but ``open_paths``; ``access`` is the access
    log's switch (see ``access_log.py``).
    """

    def __init__(
        self,
        routes: Routes,
        host: str,
        port: int,
        *,
        max_body_bytes: int,
        name: str = "http",
        auth: BearerAuth | None = None,
        open_paths: frozenset[str] = OPEN_HTTP_PATHS,
        ssl_context: ssl.SSLContext | None = None,
        header_timeout: float = HEADER_TIMEOUT_SECONDS,
        body_timeout: float = BODY_TIMEOUT_SECONDS,
        keep_alive_timeout: float = KEEP_ALIVE_SECONDS,
        backlog: int = BACKLOG,
        access: AccessLog | None = None,
        sock: socket.socket | None = None,
        stream_send_timeout: float = DEFAULT_STREAM_SEND_TIMEOUT_S,
    ) -> None:
        """``sock``: a listening socket to serve (one shared by several front-end
        processes) instead of binding ``host``:``port``. ``stream_send_timeout``: seconds a
        streamed reply (generate_stream) may wait for its client to read (0: no limit)."""
        self.name = name
        # Read by every connection; a front end given none writes no access lines.
        self.access = access if access is not None else AccessLog()
        self._sock = sock
        self.routes = routes
        self.begin_infer = routes.begin_infer if isinstance(routes, InferRoutes) else None
        self.tracer: TracingSwitch = Untraced()
        if isinstance(routes, InferRoutes):
            self.tracer = routes.tracer
        self.max_body_bytes = max_body_bytes
        self.auth = auth
        self.open_paths = open_paths
        self.authorize: Callable[[str, bytes | None], None] | None = (
            self._authorize if auth is not None else None
        )
        self.backlog = backlog
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.keep_alive_timeout = keep_alive_timeout
        self.stream_send_timeout = stream_send_timeout
        self._ssl = ssl_context
        self.connections: set[HTTPProtocol] = set()
        self.scratch = memoryview(bytearray(_SCRATCH_BYTES))
        self.date = b""
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by start()

    def _authorize(self, path: str, authorization: bytes | None) -> None:
        if self.auth is not None and path not in self.open_paths:
            self.auth.check(authorization)

    @property
    def port(self) -> int:
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._refresh()
        sock = self._sock
        if sock is None:
            sock = bind(self._host, self._port, front_end_label(self.name))
        self._server = await self.loop.create_server(
            lambda: HTTPProtocol(self),
            sock=sock,
            backlog=self.backlog,
            ssl=self._ssl,
            # A client that never finishes its TLS handshake is a slow sender too.
            ssl_handshake_timeout=self.header_timeout if self._ssl is not None else None,
        )
        self._ticker = self.loop.create_task(self._tick(), name=f"{self.name}-tick")
        log.info("%s listening on %s", self.name, self.url)

    def _refresh(self) -> None:
        self.date = b"date: " + formatdate(usegmt=True).encode() + b"\r\n"

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._refresh()
            now = time.monotonic()
            cutoff = now - self.keep_alive_timeout
            for connection in list(self.connections):
                if connection.idle_since is not None and connection.idle_since < cutoff:
                    connection.shutdown()
                else:
                    connection.check_read_timeout(now)

    async def stop(self, timeout: float) -> None:
        """Stop listening, close idle connections, let in-flight requests finish (bounded)."""
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if self._server is None:
            return
        self._server.close()
        for connection in list(self.connections):
            connection.shutdown()
        deadline = self.loop.time() + timeout
        while self.connections and self.loop.time() < deadline:
            await asyncio.sleep(0.02)
        for connection in list(self.connections):
            log.warning("closing a connection whose request did not finish in %.1f s", timeout)
            connection.abort()
        await self._server.wait_closed()
        log.info("%s stopped", self.name)
