"""``conveyor serve --trace-config``: Triton's ``[MODE,]SETTING=VALUE`` entries become the
starting trace settings; a bad entry is refused naming it."""

from __future__ import annotations

import pytest

from conveyor.server.settings import Settings
from conveyor.server.tracing.config import parse_trace_config
from conveyor.server.tracing.settings import TraceLevel, TraceMode, TraceSettings


def test_entries_become_the_starting_settings() -> None:
    config = parse_trace_config(
        [
            "rate=100",
            "level=TIMESTAMPS",
            "level=TENSORS",
            "count=5",
            "triton,file=/tmp/t.json",
            "triton,log-frequency=50",
            "opentelemetry,url=http://127.0.0.1:4318/v1/traces",
        ]
    )
    assert config.settings == TraceSettings(
        trace_level=(TraceLevel.TIMESTAMPS, TraceLevel.TENSORS),
        trace_rate=100,
        trace_count=5,
        log_frequency=50,
        trace_file="/tmp/t.json",
        trace_mode=TraceMode.TRITON,
    )
    assert config.otel_endpoint == "http://127.0.0.1:4318/v1/traces"


def test_no_entries_is_tracing_off() -> None:
    config = parse_trace_config([])
    assert config.settings == TraceSettings()
    assert not config.settings.on


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["rate=abc"], "'rate=abc'.*trace_rate.*integer >= 1"),
        (["level=LOUD"], "trace_level.*OFF, TIMESTAMPS, TENSORS.*'LOUD'"),
        (["colour=red"], "'colour=red': unknown setting"),
        (["triton,url=x"], "'triton,url=x': unknown setting"),
        (["rate"], "expected \\[MODE,\\]SETTING=VALUE"),
        (["level=TIMESTAMPS"], "needs triton,file=PATH"),
    ],
)
def test_bad_entries_are_refused_naming_them(entries: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings(trace_config=tuple(entries))
