"""The repository poller: a thread that calls ``Engine.poll_repository`` every N seconds.

Scanning walks the repository's folders and a reload loads models, both of which block for
as long as the disk and the backends take; on a thread of its own, neither ever delays the
event loop that takes requests, and requests keep being served by the versions already
loaded meanwhile. ``stop`` wakes the thread at once (no waiting out the interval).
"""

from __future__ import annotations

import logging
import threading

from conveyor.engine.engine import Engine

log = logging.getLogger("conveyor.engine")


class RepositoryPoller:
    """``RepositoryPoller(engine, interval_s).start()``; ``stop()`` before closing the engine."""

    def __init__(self, engine: Engine, interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError(f"the poll interval must be > 0 seconds, got {interval_s}")
        self.engine = engine
        self.interval_s = interval_s
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="repository-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop polling; wait (up to ``timeout``) for a scan or load in progress to end."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            try:
                self.engine.poll_repository()
            except Exception:
                # A scan that fails (a folder vanishing mid-walk, a disk error) must not end
                # polling: the next one starts from the same remembered state.
                log.exception("polling the model repository failed; trying again")
