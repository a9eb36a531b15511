"""Where the server's log lines go and what they look like, changeable while it runs.

:class:`LogControl` owns one handler on the ``conveyor`` logger (standard error, or the
``--log-file``), its formatter (:class:`~conveyor.server.log_settings.LogFormat`) and a
filter that passes each level as ``log_info`` / ``log_warning`` / ``log_error`` /
``log_verbose_level`` say. ``apply`` swaps all of them at once, so the logging extension
changes the running server's output without a restart. Nothing happens at import or in
the constructor: ``install`` is called by the server when it starts serving.

Access lines (``conveyor.access``, see ``access_log.py``) are gated by the access log's own
switch, not by ``log_info``: an operator may want request lines and nothing else.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import IO, Any

from conveyor.server.access_log import ACCESS_LOGGER, AccessLog
from conveyor.server.log_settings import LogFormat, LogSettings

ROOT_LOGGER = "conveyor"
DEFAULT_FORMAT = "%(levelname)s %(name)s: %(message)s"
# The attributes every LogRecord has; anything else on a record came from ``extra=`` (a
# model name, a request id, an access line's fields) and goes into a JSON line.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def _utc(record: logging.LogRecord) -> str:
    moment = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ISO8601Formatter(logging.Formatter):
    """``2026-01-31T12:00:00.123Z INFO conveyor.server: message`` (UTC)."""

    def __init__(self) -> None:
        super().__init__(DEFAULT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return f"{_utc(record)} {super().format(record)}"


class JSONFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, then the record's extras."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _utc(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in line:
                line[key] = value
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def formatter(log_format: LogFormat) -> logging.Formatter:
    if log_format is LogFormat.JSON:
        return JSONFormatter()
    if log_format is LogFormat.ISO8601:
        return ISO8601Formatter()
    return logging.Formatter(DEFAULT_FORMAT)


class LevelSwitches(logging.Filter):
    """Passes a record when the setting for its level is on (Triton's per-level switches)."""

    def __init__(self, settings: LogSettings) -> None:
        super().__init__()
        self.settings = settings

    def filter(self, record: logging.LogRecord) -> bool:
        s = self.settings
        if record.name == ACCESS_LOGGER:
            return True  # its own switch (AccessLog.enabled) decided already
        level = record.levelno
        if level >= logging.ERROR:
            return s.log_error
        if level >= logging.WARNING:
            return s.log_warning
        if level >= logging.INFO:
            return s.log_info
        return s.log_verbose_level > 0


class LogControl:
    """The server's current log settings, applied to the ``conveyor`` loggers."""

    def __init__(
        self, settings: LogSettings, access: AccessLog, *, stream: IO[str] | None = None
    ) -> None:
        self.started_with = settings
        self.settings = settings
        self.access = access
        self._stream = stream
        self._handler: logging.Handler | None = None
        self._switches = LevelSwitches(settings)

    def install(self) -> None:
        """Send the ``conveyor`` loggers' lines through this control's handler only."""
        logger = logging.getLogger(ROOT_LOGGER)
        logger.propagate = False  # not also through the root logger's handler
        self.apply(self.settings)

    def apply(self, settings: LogSettings) -> None:
        logger = logging.getLogger(ROOT_LOGGER)
        if self._handler is None or settings.log_file != self.settings.log_file:
            handler = self._open(settings.log_file)
            handler.addFilter(self._switches)
            if self._handler is not None:
                logger.removeHandler(self._handler)
                self._handler.close()
            self._handler = handler
            logger.addHandler(handler)
        self._handler.setFormatter(formatter(settings.log_format))
        self._switches.settings = settings
        # Below INFO only when verbose: a debug call elsewhere then costs one level check.
        logger.setLevel(logging.DEBUG if settings.log_verbose_level > 0 else logging.INFO)
        self.access.enabled = settings.access_log
        self.settings = settings

    def _open(self, log_file: str) -> logging.Handler:
        if log_file:
            return logging.FileHandler(log_file, encoding="utf-8")
        return logging.StreamHandler(self._stream or sys.stderr)

    def close(self) -> None:
        """Undo :meth:`install`: the ``conveyor`` loggers go through the root logger again."""
        logger = logging.getLogger(ROOT_LOGGER)
        if self._handler is not None:
            logger.removeHandler(self._handler)
            self._handler.close()
            self._handler = None
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
