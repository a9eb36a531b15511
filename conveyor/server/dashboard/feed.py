"""The dashboard's routes on the metrics port: the page, its assets, the snapshot as JSON
and as server-sent events.

Every open page shares one snapshot a second: the first request after a second has passed
starts one build on a worker thread (reading statistics takes the engine's locks) and every
other request in that second awaits the same result.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import TYPE_CHECKING

from conveyor.server.dashboard.snapshot import Snapshots
from conveyor.server.metrics import LatencyHistograms

if TYPE_CHECKING:
    from conveyor.engine import Engine

INTERVAL_S = 1.0
PAGE_PATHS = frozenset(("/", "/dashboard", "/dashboard/"))
STATE_PATH = "/dashboard/state"
EVENTS_PATH = "/dashboard/events"
ASSET_PREFIX = "/dashboard/static/"
_TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".svg": b"image/svg+xml",
}
Headers = list[tuple[bytes, bytes]]


def _assets() -> dict[str, tuple[bytes, bytes]]:
    """The shipped files, read once: name -> (content type, bytes). Only these are served."""
    folder = resources.files(__package__).joinpath("static")
    found = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1]
        if item.is_file() and suffix in _TYPES:
            found[item.name] = (_TYPES[suffix], item.read_bytes())
    return found


class DashboardFeed:
    """Serves the dashboard; ``reply(path)`` is None for a path that is not its own."""

    def __init__(
        self, engine: Callable[[], Engine | None], histograms: LatencyHistograms | None
    ) -> None:
        self._snapshots = Snapshots(engine, histograms)
        self._assets = _assets()
        self._latest = b"{}"
        self._at = float("-inf")
        self._building: asyncio.Future[bytes] | None = None

    async def state(self) -> bytes:
        """The current snapshot as JSON: at most one build per second, shared."""
        if time.monotonic() - self._at < INTERVAL_S:
            return self._latest
        if self._building is None:
            loop = asyncio.get_running_loop()
            self._building = loop.run_in_executor(None, self._build)
        building = self._building
        try:
            return await asyncio.shield(building)
        finally:
            if self._building is building and building.done():
                self._building = None

    def _build(self) -> bytes:
        body = json.dumps(self._snapshots.take(), separators=(",", ":")).encode()
        self._latest, self._at = body, time.monotonic()
        return body

    async def events(self) -> AsyncIterator[bytes]:
        """One ``data:`` event a second, until the client leaves or the server stops."""
        yield b"retry: 2000\n\n"  # reconnect after 2 s if the stream is cut
        while True:
            started = time.monotonic()
            yield b"data: " + await self.state() + b"\n\n"
            await asyncio.sleep(max(0.05, INTERVAL_S - (time.monotonic() - started)))

    def asset(self, path: str) -> tuple[bytes, bytes] | None:
        """(content type, body) of the page or one of its files, None if not ours."""
        if path in PAGE_PATHS:
            return self._assets.get("index.html")
        if path.startswith(ASSET_PREFIX):
            return self._assets.get(path.removeprefix(ASSET_PREFIX))
        return None
