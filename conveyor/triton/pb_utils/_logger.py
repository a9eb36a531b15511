"""``Logger``: a model's log lines, written to Conveyor's log (logger ``conveyor.triton``)."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

_log = logging.getLogger("conveyor.triton")


class LogLevel(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


_LEVELS = {
    LogLevel.INFO: logging.INFO,
    LogLevel.WARNING: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
    LogLevel.VERBOSE: logging.DEBUG,
}


def _logging_at(level: LogLevel) -> Callable[[str], None]:
    """``Logger.log`` at ``level``: Triton's ``log_info``, ``log_warn``, ..."""

    def log_at(message: str) -> None:
        Logger.log(message, level)

    return log_at


class Logger:
    """Triton's model logger; VERBOSE lines are DEBUG lines of ``conveyor.triton``."""

    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: object = LogLevel.INFO) -> None:
        # Typed as Triton's (pybind11): a level that is not a LogLevel (1, None) is a
        # TypeError, so is a message that is not a str.
        if not isinstance(level, LogLevel):
            raise TypeError(f"Logger.log level: expected a pb_utils.LogLevel, got {level!r}")
        _log.log(_LEVELS[level], "%s", _message(message))

    log_info = staticmethod(_logging_at(LogLevel.INFO))
    log_warn = staticmethod(_logging_at(LogLevel.WARNING))
    log_error = staticmethod(_logging_at(LogLevel.ERROR))
    log_verbose = staticmethod(_logging_at(LogLevel.VERBOSE))


def _message(message: object) -> str:
    if not isinstance(message, str):
        raise TypeError(f"Logger message: expected a str, got {type(message).__name__}")
    return message
