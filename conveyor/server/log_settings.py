"""Triton's logging extension as values: the settings, and a checked update of them.

Pure: no I/O and no ``logging`` calls. ``log_output.LogControl`` applies a
:class:`LogSettings` to the process's loggers; the data plane validates a client's update
here, once, for both protocols (HTTP ``POST /v2/logging``, gRPC ``LogSettings``).

The names and types are Triton's (``log_file``, ``log_info``, ``log_warning``,
``log_error``, ``log_verbose_level``, ``log_format``); Conveyor adds the ``json`` format
and ``access_log``. A value of ``None`` (an unset gRPC value, a JSON ``null``) puts that
setting back to what the server was started with.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from conveyor.errors import InvalidInput, Unsupported


class LogFormat(enum.StrEnum):
    """How each log line is written."""

    DEFAULT = "default"  # LEVEL logger: message
    ISO8601 = "ISO8601"  # an ISO 8601 UTC time first, then as default
    JSON = "json"  # one JSON object per line (Conveyor's; Triton has no such format)


@dataclasses.dataclass(frozen=True)
class LogSettings:
    """What the server logs, where, and how; see docs/logging.md."""

    log_file: str = ""  # empty: standard error
    log_info: bool = True
    log_warning: bool = True
    log_error: bool = True
    log_verbose_level: int = 0  # 0: no debug lines; 1 or more: debug lines too
    log_format: LogFormat = LogFormat.DEFAULT
    access_log: bool = False  # one line per request, on the conveyor.access logger

    def as_dict(self) -> dict[str, Any]:
        """Triton's JSON form: setting name -> value (the format as its plain string)."""
        values = dataclasses.asdict(self)
        values["log_format"] = str(self.log_format)
        return values


# What each setting must be, as words for the errors.
EXPECTED = {
    "log_file": "a string (a file path, or empty for standard error)",
    "log_info": "true or false",
    "log_warning": "true or false",
    "log_error": "true or false",
    "log_verbose_level": "an integer >= 0",
    "log_format": f"one of {', '.join(repr(f.value) for f in LogFormat)}",
    "access_log": "true or false",
}


def updated(
    current: LogSettings, changes: Mapping[str, Any], started_with: LogSettings
) -> LogSettings:
    """``current`` with ``changes`` applied, every one checked before any is.

    Raises InvalidInput naming the setting and what it must be (an unknown name, a value
    of the wrong type); Unsupported for a different ``log_file``: the file a server writes
    to is chosen by whoever starts it, never over the network (a client could otherwise
    make the server write into any file it may write).
    """
    values: dict[str, Any] = {}
    for name, value in changes.items():
        if name not in EXPECTED:
            raise InvalidInput(
                f"unknown log setting {name!r}; the settings are {', '.join(EXPECTED)}"
            )
        if value is None:
            value = getattr(started_with, name)
        values[name] = _checked(name, value)
    new_file = values.get("log_file", current.log_file)
    if new_file != current.log_file:
        raise Unsupported(
            f"log setting 'log_file' cannot be changed over the network (asked for "
            f"{new_file!r}, the server writes to {current.log_file or 'standard error'!r}); "
            "start the server with --log-file PATH to choose the file"
        )
    return dataclasses.replace(current, **values)


def _checked(name: str, value: Any) -> Any:
    """``value`` as the setting's type, or InvalidInput saying what was expected."""
    if name in ("log_info", "log_warning", "log_error", "access_log"):
        if isinstance(value, bool):
            return value
    elif name == "log_verbose_level":
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    elif name == "log_format":
        if isinstance(value, str):
            for member in LogFormat:
                if value == member.value:
                    return member
    elif name == "log_file" and isinstance(value, str):
        return value
    raise InvalidInput(f"log setting {name!r} must be {EXPECTED[name]}, got {value!r}")
