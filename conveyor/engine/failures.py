"""Model failures in the server log, with their tracebacks, at a rate a log can take.

A request that makes a model raise gets its 500 from the front end, but whoever runs the
server needs the traceback (file and line) to fix the model. A model that fails on every
request must not bury the log in identical tracebacks, so each model logs at most one
failure per ``interval_s`` and counts the rest, which the next logged one reports.
Every failure, logged or not, is also kept in a short ring (``recent()``) for the dashboard.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from collections.abc import Callable

# One traceback per model per minute: enough to see a failure come and go.
DEFAULT_INTERVAL_S = 60.0
# The last failures kept per model for the dashboard: enough to read, never a growing list.
RECENT_FAILURES = 10


@dataclasses.dataclass(frozen=True)
class RecentFailure:
    """One failure of a model: when (Unix seconds) and its message (no traceback)."""

    at: float
    message: str


class FailureLog:
    """Logs one model's failures: at most one every ``interval_s`` seconds of ``clock``."""

    def __init__(
        self,
        logger: logging.Logger,
        model: str,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._model = model
        self._interval = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None
        self._suppressed = 0
        self._recent: collections.deque[RecentFailure] = collections.deque(maxlen=RECENT_FAILURES)

    def recent(self) -> tuple[RecentFailure, ...]:
        """The last failures, oldest first (logged or not)."""
        with self._lock:
            return tuple(self._recent)

    def failed(self, message: str, details: str | None = None) -> bool:
        """Log ``message`` (and ``details``, a traceback) unless one was logged lately.

        True if it was logged; False if it was only counted.
        """
        now = self._clock()
        with self._lock:
            self._recent.append(RecentFailure(time.time(), message))
            if self._last is not None and now - self._last < self._interval:
                self._suppressed += 1
                return False
            self._last, suppressed = now, self._suppressed
            self._suppressed = 0
        if suppressed:
            message = (
                f"{message} ({suppressed} more failure{'s' if suppressed != 1 else ''} of "
                f"model {self._model!r} in the last {self._interval:g} s were not logged)"
            )
        if details:
            message = f"{message}\n{details.rstrip()}"
        self._logger.error("%s", message)
        return True
