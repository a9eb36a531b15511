"""``conveyor serve --trace-config``, in Triton's shape: ``[MODE,]SETTING=VALUE``, repeated.

Global settings: ``rate``, ``level`` (repeat it for several levels), ``count``, ``mode``.
``triton,file=PATH`` and ``triton,log-frequency=N`` set the trace file; ``opentelemetry,url=``
the OTLP endpoint (else the OTEL_* environment variables decide).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from conveyor.errors import InvalidInput
from conveyor.server.tracing.otel import require_sdk
from conveyor.server.tracing.settings import TraceMode, TraceSettings, parse

_GLOBAL = {
    "rate": "trace_rate",
    "level": "trace_level",
    "count": "trace_count",
    "mode": "trace_mode",
}
_TRITON = {"file": "trace_file", "log-frequency": "log_frequency"}


@dataclasses.dataclass(frozen=True)
class TraceConfig:
    settings: TraceSettings
    otel_endpoint: str | None = None


def parse_trace_config(entries: Iterable[str]) -> TraceConfig:
    """The settings the entries give; ValueError names the entry and what was expected."""
    values: dict[str, object] = {}
    levels: list[str] = []
    endpoint = None
    for entry in entries:
        mode, _, setting = entry.rpartition(",")
        name, equals, value = setting.partition("=")
        if not equals:
            raise ValueError(f"--trace-config {entry!r}: expected [MODE,]SETTING=VALUE")
        if mode == "opentelemetry" and name == "url":
            endpoint = value
            continue
        table = {"": _GLOBAL, "triton": _TRITON}.get(mode)
        field = None if table is None else table.get(name)
        if field is None:
            raise ValueError(
                f"--trace-config {entry!r}: unknown setting; expected rate=, level=, count=, "
                "mode=, triton,file=, triton,log-frequency= or opentelemetry,url="
            )
        if field == "trace_level":
            levels.append(value)
            continue
        try:
            values[field] = parse(field, value)
        except InvalidInput as exc:
            raise ValueError(f"--trace-config {entry!r}: {exc.message}") from None
    if levels:
        try:
            values["trace_level"] = parse("trace_level", levels)
        except InvalidInput as exc:
            raise ValueError(f"--trace-config level: {exc.message}") from None
    settings = TraceSettings(**values)  # type: ignore[arg-type]
    if settings.on and settings.trace_mode is TraceMode.OPENTELEMETRY:
        try:
            require_sdk()
        except InvalidInput as exc:
            raise ValueError(f"--trace-config mode=opentelemetry: {exc.message}") from None
    if settings.on and settings.trace_mode is TraceMode.TRITON and not settings.trace_file:
        raise ValueError(
            "--trace-config level=... with mode triton needs triton,file=PATH (the trace file)"
        )
    return TraceConfig(settings, endpoint)
