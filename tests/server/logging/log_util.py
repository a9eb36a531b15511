"""What a running server writes, from a point on, for tests that read its log lines."""

from __future__ import annotations

import json
from typing import Any

from conveyor.testing import RunningServer
from tests.polling import wait_until


class Output:
    """What a server writes from now on (its output so far is skipped)."""

    def __init__(self, server: RunningServer) -> None:
        self._server = server
        self._start = len(server.output())

    def text(self) -> str:
        return self._server.output()[self._start :]

    def lines(self) -> list[str]:
        return self.text().splitlines()

    def wait_for(self, text: str, timeout: float = 10.0) -> None:
        wait_until(lambda: text in self.text(), timeout, lambda: f"{text!r} in {self.text()!r}")


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` that is a JSON object (the conveyor loggers' lines in json)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]
