"""A server's Prometheus metrics as the tests read them: one model's sample, polled."""

from __future__ import annotations

import re
import urllib.request

from conveyor.testing import RunningServer
from tests.polling import wait_until


def metric(server: RunningServer, name: str, model: str, headers: dict | None = None) -> float:
    """The value of ``name`` for ``model`` now (0 if the server has no such sample)."""
    request = urllib.request.Request(server.metrics_url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=5) as response:
        text = response.read().decode()
    found = re.search(rf'^{name}\{{[^}}]*model="{model}"[^}}]*\}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def pending(server: RunningServer, model: str) -> int:
    """Requests queued for ``model`` now."""
    return int(metric(server, "nv_inference_pending_request_count", model))


def wait_pending(server: RunningServer, model: str, count: int, timeout: float = 10.0) -> None:
    wait_until(lambda: pending(server, model) == count, timeout, f"{model} having {count} queued")
