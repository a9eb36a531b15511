"""A progress line on stderr while a point runs: elapsed time and requests done so far.

On a terminal it redraws one line in place; otherwise (CI logs, pipes) it stays quiet until
the point ends and then writes one summary line.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import TextIO

_WIDTH = 24


class Progress:
    def __init__(
        self,
        label: str,
        total_s: float,
        counts: Sequence[int],
        stream: TextIO | None = None,
        enabled: bool = True,
    ) -> None:
        self.label = label
        self.total_s = total_s
        self.counts = counts
        self.stream = stream or sys.stderr
        self.live = enabled and self.stream.isatty()
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0

    def __enter__(self) -> Progress:
        self._start = time.monotonic()
        if self.live:
            self._thread = threading.Thread(target=self._draw_loop, daemon=True)
            self._thread.start()
        return self

    def _draw_loop(self) -> None:
        while not self._stop.wait(0.2):
            elapsed = time.monotonic() - self._start
            filled = min(_WIDTH, int(_WIDTH * elapsed / self.total_s)) if self.total_s else _WIDTH
            bar = "#" * filled + "." * (_WIDTH - filled)
            done = sum(self.counts)
            self.stream.write(
                f"\r  {self.label} [{bar}] {elapsed:4.1f}/{self.total_s:.1f}s {done:,} done "
            )
            self.stream.flush()

    def finish(self, summary: str) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
            self.stream.write("\r\033[K")
        if self.enabled:
            self.stream.write(f"  {self.label}: {summary}\n")
            self.stream.flush()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
