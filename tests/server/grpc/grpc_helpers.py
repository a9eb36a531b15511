"""Helpers shared by the gRPC tests (a plain module: conftest.py holds only fixtures)."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

from conveyor.testing import RunningServer

MiB = 1024 * 1024
MAX_MESSAGE_BYTES = 8 * MiB  # the test server's limit: small, so the size-limit test sends little


class RunLog:
    """The tags a slow-style model ran, in order (it appends each before it sleeps)."""

    def __init__(self, repository: Path, model: str) -> None:
        self.path = repository / model / "1" / "runs.log"

    def clear(self) -> None:
        self.path.write_bytes(b"")

    def tags(self) -> list[str]:
        if not self.path.exists():
            return []
        return self.path.read_bytes().decode().split()

    def wait_for(self, tag: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while tag not in self.tags():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{tag!r} never ran; ran: {self.tags()}")
            time.sleep(0.01)


def pending(server: RunningServer, model: str) -> int:
    """Requests queued for ``model`` now, from the server's Prometheus metrics."""
    with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
        text = response.read().decode()
    found = re.search(
        rf'^nv_inference_pending_request_count\{{[^}}]*model="{model}"[^}}]*\}} (\S+)$',
        text,
        re.MULTILINE,
    )
    return int(float(found.group(1))) if found else 0


def wait_pending(server: RunningServer, model: str, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while pending(server, model) != count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{model} never had {count} requests queued")
        time.sleep(0.01)
