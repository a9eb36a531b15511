"""The metrics port: ``GET /metrics`` and the live dashboard (``/``, ``/dashboard``) on the
server's own HTTP front end.

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
from conveyor.server.dashboard import DashboardFeed
from conveyor.server.dashboard.feed import EVENTS_PATH, STATE_PATH
from conveyor.server.http.connection import UntilCloseReply
from conveyor.server.http.listener import BACKLOG, HTTPToolsFrontEnd
from conveyor.server.http.routes import Reply
from conveyor.server.metrics import LatencyHistograms, exposition, registry

if TYPE_CHECKING:
    from conveyor.engine import Engine

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
# A scrape sends no body; anything larger is refused before it is read.
MAX_BODY_BYTES = 64 * 1024
NOT_FOUND: Reply = (
    404,
    b"not found: metrics are at /metrics, the dashboard at /\n",
    [(b"content-type", b"text/plain")],
)

# Every route here is read-only.
METHOD_NOT_ALLOWED: Reply = (
    405,
    b"method not allowed: the metrics port answers GET and HEAD\n",
    [(b"content-type", b"text/plain"), (b"allow", b"GET, HEAD")],
)

NO_STORE = (b"cache-control", b"no-store")


class MetricsRoutes:
    """``GET``/``HEAD /metrics`` in Prometheus text format, built off the event loop, and
    the dashboard: its page and files, ``/dashboard/state`` (JSON) and
    ``/dashboard/events`` (server-sent events, one snapshot a second)."""

    def __init__(
        self, metrics_registry: CollectorRegistry, dashboard: DashboardFeed | None = None
    ) -> None:
        self._registry = metrics_registry
        self._dashboard = dashboard

    async def handle(
        self,
        method: str,
        path: str,
        read_body: Callable[[], Awaitable[bytes]],
        header_length: bytes | None,
    ) -> Reply | UntilCloseReply:
        if method not in ("GET", "HEAD"):
            return METHOD_NOT_ALLOWED
        if path != "/metrics":
            return await self._dashboard_reply(path)
        loop = asyncio.get_running_loop()
        # Reading statistics takes the engine's locks: not on the event loop.
        body = await loop.run_in_executor(None, exposition, self._registry)
        return 200, body, [(b"content-type", CONTENT_TYPE)]

    async def _dashboard_reply(self, path: str) -> Reply | UntilCloseReply:
        dashboard = self._dashboard
        if dashboard is None:
            return NOT_FOUND
        if path == EVENTS_PATH:
            headers = [(b"content-type", b"text/event-stream"), NO_STORE]
            return 200, dashboard.events(), headers
        if path == STATE_PATH:
            return 200, await dashboard.state(), [(b"content-type", b"application/json"), NO_STORE]
        asset = dashboard.asset(path)
        if asset is None:
            return NOT_FOUND
        content_type, body = asset
        return 200, body, [(b"content-type", content_type)]


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
        MetricsRoutes(registry(engine, histograms), DashboardFeed(engine, histograms)),
        host,
        port,
        name="metrics",
        max_body_bytes=MAX_BODY_BYTES,
        auth=auth,
        open_paths=frozenset(),  # the token guards every path here
        ssl_context=ssl_context,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        keep_alive_timeout=keep_alive_timeout,
        backlog=backlog,
    )
