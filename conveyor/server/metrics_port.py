"""The metrics port: ``GET /metrics`` on the server's own HTTP front end.

The same httptools front end as the V2 port, so the metrics port has the same read
timeouts, keep-alive limit, backlog, TLS and bearer token; only the routes differ.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from conveyor.server.auth import BearerAuth
from conveyor.server.http.connection import BACKLOG, HTTPToolsFrontEnd
from conveyor.server.http.routes import Reply
from conveyor.server.metrics import LatencyHistograms, exposition, registry

if TYPE_CHECKING:
    from conveyor.engine import Engine

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
# A scrape sends no body; anything larger is refused before it is read.
MAX_BODY_BYTES = 64 * 1024
NOT_FOUND: Reply = (
    404,
    b"not found: metrics are at /metrics\n",
    [(b"content-type", b"text/plain")],
)


class MetricsRoutes:
    """``GET``/``HEAD /metrics`` in Prometheus text format, built off the event loop."""

    def __init__(self, metrics_registry: CollectorRegistry) -> None:
        self._registry = metrics_registry

    async def handle(
        self,
        method: str,
        path: str,
        read_body: Callable[[], Awaitable[bytes]],
        header_length: bytes | None,
    ) -> Reply:
        if path != "/metrics" or method not in ("GET", "HEAD"):
            return NOT_FOUND
        loop = asyncio.get_running_loop()
        # Reading statistics takes the engine's locks: not on the event loop.
        body = await loop.run_in_executor(None, exposition, self._registry)
        return 200, body, [(b"content-type", CONTENT_TYPE)]


def metrics_front_end(
    engine: Callable[[], Engine | None],
    histograms: LatencyHistograms | None,
    host: str,
    port: int,
    *,
    auth: BearerAuth | None = None,
    ssl_context: ssl.SSLContext | None = None,
    header_timeout: float,
    body_timeout: float,
    keep_alive_timeout: float,
    backlog: int = BACKLOG,
) -> HTTPToolsFrontEnd:
    return HTTPToolsFrontEnd(
        MetricsRoutes(registry(engine, histograms)),
        host,
        port,
        name="metrics",
        max_body_bytes=MAX_BODY_BYTES,
        auth=auth,
        open_paths=frozenset(),  # the token guards every path here, as before
        ssl_context=ssl_context,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        keep_alive_timeout=keep_alive_timeout,
        backlog=backlog,
    )
