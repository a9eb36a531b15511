"""Triton's trace settings: their names, their checks, and global values with per-model overrides.

In the protocol every value is a string, except ``trace_level``, a list of strings (HTTP
JSON ``{"trace_rate": "100", "trace_level": ["TIMESTAMPS"]}``; gRPC a map of string lists).
An update names only the settings it changes; a setting sent as null (HTTP) or with no
values (gRPC) is cleared: a model's own value then falls back to the global one, and a
global value to its default. Reading a model's settings gives the values in effect for it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence

from conveyor.errors import InvalidInput


class TraceLevel(enum.StrEnum):
    OFF = "OFF"
    TIMESTAMPS = "TIMESTAMPS"
    TENSORS = "TENSORS"


class TraceMode(enum.StrEnum):
    TRITON = "triton"  # Triton's JSON trace file
    OPENTELEMETRY = "opentelemetry"  # spans exported over OTLP


# A value as the protocol carries it: a string, or a list of strings (trace_level); None
# clears the setting.
SettingValue = str | Sequence[str] | None


@dataclasses.dataclass(frozen=True)
class TraceSettings:
    """The settings in effect for one scope (the server, or one model)."""

    trace_level: tuple[TraceLevel, ...] = (TraceLevel.OFF,)
    trace_rate: int = 1000  # trace 1 request of every trace_rate
    trace_count: int = -1  # traces left to take; -1: no limit
    log_frequency: int = 0  # write the file every this many traces; 0: only at shutdown
    trace_file: str = ""
    trace_mode: TraceMode = TraceMode.TRITON

    @property
    def on(self) -> bool:
        return any(level is not TraceLevel.OFF for level in self.trace_level)

    def as_protocol(self) -> dict[str, str | list[str]]:
        """Every setting as the protocol writes it (strings; trace_level a list)."""
        return {
            "trace_level": [str(level) for level in self.trace_level],
            "trace_rate": str(self.trace_rate),
            "trace_count": str(self.trace_count),
            "log_frequency": str(self.log_frequency),
            "trace_file": self.trace_file,
            "trace_mode": str(self.trace_mode),
        }


# A client that could name the file would choose which file the server writes: trace_file
# is set only at start (as Triton no longer lets its trace API change it).
FILE_AT_START_ONLY = "trace_file"
TRACE_FILE_AT_START = (
    "trace setting 'trace_file' cannot be changed through the trace API; start the server "
    "with --trace-config triton,file=PATH"
)
NAMES = tuple(field.name for field in dataclasses.fields(TraceSettings))
DEFAULTS = TraceSettings()


def parse(name: str, value: str | Sequence[str]) -> object:
    """One setting's protocol value -> its typed value; InvalidInput names what was expected."""
    if name not in NAMES:
        raise InvalidInput(f"unknown trace setting {name!r}; expected one of {', '.join(NAMES)}")
    values = _strings(name, value)
    if name == "trace_level":
        return _levels(values)
    if len(values) != 1:
        raise InvalidInput(f"trace setting {name!r} takes one value, got {len(values)}")
    text = values[0]
    if name == "trace_rate":
        return _integer(name, text, 1, "an integer >= 1 (trace 1 request of every N)")
    if name == "trace_count":
        return _integer(name, text, -1, "an integer >= -1 (-1: no limit)")
    if name == "log_frequency":
        return _integer(name, text, 0, "an integer >= 0 (0: write the file at shutdown)")
    if name == "trace_mode":
        try:
            return TraceMode(text.lower())
        except ValueError:
            raise InvalidInput(
                f"trace setting 'trace_mode' must be one of {', '.join(TraceMode)}, got {text!r}"
            ) from None
    return text  # trace_file


def _strings(name: str, value: object) -> list[str]:
    """The protocol's strings of a value: a string, or (gRPC's form, and trace_level's) a
    list of strings. A JSON number, boolean or object is refused: Triton's trace settings
    are strings (``{"log_frequency": "5"}``), as tritonclient's gRPC client sends them."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    if name == "trace_level":
        expected = 'a list of strings, e.g. ["TIMESTAMPS"]'
    else:
        expected = f'a string, e.g. "{DEFAULTS.as_protocol()[name]}"'
    raise InvalidInput(
        f"trace setting {name!r} must be {expected} (or null to clear it), got {_json_type(value)}"
    )


def _json_type(value: object) -> str:
    """What a client sent, in JSON's words (never its whole value, which may be huge)."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, float) or (isinstance(value, int) and abs(value) < 10**20):
        return f"the number {value!r}"
    if isinstance(value, int):
        return "a number"  # too long to quote (repr refuses past 4,300 digits)
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list holding a value that is not a string"
    return type(value).__name__


def _levels(values: list[str]) -> tuple[TraceLevel, ...]:
    levels: list[TraceLevel] = []
    for text in values:
        try:
            level = TraceLevel(text.upper())
        except ValueError:
            raise InvalidInput(
                f"trace setting 'trace_level' must be a list of {', '.join(TraceLevel)}, "
                f"got {text!r}"
            ) from None
        if level not in levels:
            levels.append(level)
    if not levels:
        raise InvalidInput("trace setting 'trace_level' needs at least one level")
    if TraceLevel.OFF in levels and len(levels) > 1:
        raise InvalidInput("trace setting 'trace_level': OFF cannot be combined with other levels")
    return tuple(levels)


def _integer(name: str, text: str, minimum: int, expected: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        raise InvalidInput(f"trace setting {name!r} must be {expected}, got {text!r}") from None
    if number < minimum:
        raise InvalidInput(f"trace setting {name!r} must be {expected}, got {text!r}")
    return number


class TraceSettingsStore:
    """The global settings and each model's overrides. Not thread-safe: the event loop
    owns it (updates and reads come from the front ends)."""

    def __init__(self, initial: TraceSettings = DEFAULTS) -> None:
        self._global: dict[str, object] = {}
        self._defaults = initial
        self._models: dict[str, dict[str, object]] = {}
        # Each request being sampled reads its model's settings: built once per change.
        self._cache: dict[str | None, TraceSettings] = {}

    def effective(self, model: str | None) -> TraceSettings:
        cached = self._cache.get(model)
        if cached is None:
            cached = self._cache[model] = self._build(model)
        return cached

    def _build(self, model: str | None) -> TraceSettings:
        values = dict(self._global)
        if model:
            values.update(self._models.get(model, {}))
        return dataclasses.replace(self._defaults, **values)  # type: ignore[arg-type]

    def overrides(self, model: str) -> frozenset[str]:
        """The settings a model has its own value for."""
        return frozenset(self._models.get(model, {}))

    def update(self, model: str | None, changes: Mapping[str, SettingValue]) -> TraceSettings:
        """Apply ``changes`` (all checked first: a bad one changes nothing); the result."""
        parsed: dict[str, object | None] = {}
        for name, value in changes.items():
            if name not in NAMES:
                parse(name, "")  # raises, naming the settings there are
            empty = value is None or (not isinstance(value, str) and not _strings(name, value))
            if name == FILE_AT_START_ONLY:
                if not empty:
                    raise InvalidInput(TRACE_FILE_AT_START)
                continue  # clearing it: it was never set here, nothing to do
            parsed[name] = None if empty else parse(name, value)  # type: ignore[arg-type]
        scope = self._models.setdefault(model, {}) if model else self._global
        for name, typed in parsed.items():
            if typed is None:
                scope.pop(name, None)
            else:
                scope[name] = typed
        if model and not scope:
            self._models.pop(model, None)
        self._cache.clear()
        return self.effective(model)

    def saved(self) -> tuple[dict[str, object], dict[str, dict[str, object]]]:
        """A copy of every value set, for :meth:`restore`."""
        return dict(self._global), {m: dict(v) for m, v in self._models.items()}

    def restore(self, saved: tuple[dict[str, object], dict[str, dict[str, object]]]) -> None:
        self._global, self._models = saved
        self._cache.clear()

    def set_count(self, model: str | None, remaining: int) -> None:
        """Record the traces left where the count in effect for ``model`` is kept."""
        if model and "trace_count" in self._models.get(model, {}):
            self._models[model]["trace_count"] = remaining
        else:
            self._global["trace_count"] = remaining
        self._cache.clear()

    def any_on(self) -> bool:
        """True when some scope traces (the hot path's one check reads this, cached)."""
        if self.effective(None).on:
            return True
        return any(self.effective(model).on for model in self._models)
