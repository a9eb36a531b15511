"""``Logger``: a model's log lines, written to Conveyor's log (logger ``conveyor.triton``)."""

from __future__ import annotations

import enum
import logging

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

    @staticmethod
    def log_info(message: str) -> None:
        _log.info("%s", _message(message))

    @staticmethod
    def log_warn(message: str) -> None:
        _log.warning("%s", _message(message))

    @staticmethod
    def log_error(message: str) -> None:
        _log.error("%s", _message(message))

    @staticmethod
    def log_verbose(message: str) -> None:
        _log.debug("%s", _message(message))


def _message(message: object) -> str:
    if not isinstance(message, str):
        raise TypeError(f"Logger message: expected a str, got {type(message).__name__}")
    return message
