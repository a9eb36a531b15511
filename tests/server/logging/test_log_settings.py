"""The logging extension's values, checked without a server: updates, routes, formats."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest

from conveyor.errors import InvalidInput, Unsupported
from conveyor.server.access_log import route_of
from conveyor.server.log_output import ISO8601Formatter, JSONFormatter, LevelSwitches
from conveyor.server.log_settings import LogFormat, LogSettings, updated

START = LogSettings()


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, START),
        ({"log_info": False}, LogSettings(log_info=False)),
        ({"log_verbose_level": 3}, LogSettings(log_verbose_level=3)),
        ({"log_format": "ISO8601"}, LogSettings(log_format=LogFormat.ISO8601)),
        ({"log_format": "json", "access_log": True},
         LogSettings(log_format=LogFormat.JSON, access_log=True)),
        ({"log_file": ""}, START),  # the same file: not a change, so allowed
    ],
)  # fmt: skip
def test_good_updates(changes: dict[str, Any], expected: LogSettings) -> None:
    assert updated(START, changes, START) == expected


def test_none_puts_back_the_start_value() -> None:
    started_with = LogSettings(log_verbose_level=2, log_format=LogFormat.JSON)
    current = LogSettings(log_verbose_level=0, log_info=False)
    new = updated(current, {"log_verbose_level": None, "log_format": None}, started_with)
    assert new == LogSettings(log_verbose_level=2, log_info=False, log_format=LogFormat.JSON)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"log_colour": True}, "unknown log setting 'log_colour'; the settings are log_file,"),
        ({"log_info": "maybe"}, "'log_info' must be true or false, got 'maybe'"),
        ({"log_error": 1}, "'log_error' must be true or false, got 1"),
        ({"log_verbose_level": -1}, "'log_verbose_level' must be an integer >= 0, got -1"),
        ({"log_verbose_level": True}, "'log_verbose_level' must be an integer >= 0, got True"),
        ({"log_verbose_level": 1.5}, "'log_verbose_level' must be an integer >= 0, got 1.5"),
        ({"log_format": "iso8601"}, "'log_format' must be one of 'default', 'ISO8601', 'json'"),
        ({"log_file": 7}, "'log_file' must be a string"),
    ],
)
def test_bad_updates_name_the_setting(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        updated(START, {"log_info": False, **changes}, START)
    assert words in raised.value.message


def test_log_file_is_not_changed_over_the_network() -> None:
    with pytest.raises(Unsupported, match="'log_file' cannot be changed over the network"):
        updated(START, {"log_file": "/tmp/elsewhere.log"}, START)


def test_as_dict_is_tritons_json_form() -> None:
    assert LogSettings(log_format=LogFormat.ISO8601).as_dict() == {
        "log_file": "",
        "log_info": True,
        "log_warning": True,
        "log_error": True,
        "log_verbose_level": 0,
        "log_format": "ISO8601",
        "access_log": False,
    }


@pytest.mark.parametrize(
    ("path", "route", "model"),
    [
        ("/v2", "/v2", None),
        ("/v2/health/ready", "/v2/health/ready", None),
        ("/v2/models/stats", "/v2/models/stats", None),
        ("/v2/models/tiny/infer", "/v2/models/{model}/infer", "tiny"),
        ("/v2/models/tiny/versions/2/infer", "/v2/models/{model}/versions/{version}/infer",
         "tiny"),
        ("/v2/models/tiny", "/v2/models/{model}", "tiny"),
        ("/v2/repository/models/tiny/load", "/v2/repository/models/{model}/load", "tiny"),
        ("/v2/systemsharedmemory/region/a/b/register",
         "/v2/systemsharedmemory/region/{region}/register", None),
        ("/v2/logging", "/v2/logging", None),
        ("/other\nline", "/other\\nline", None),  # a path never breaks a log line
    ],
)  # fmt: skip
def test_route_templates(path: str, route: str, model: str | None) -> None:
    assert route_of(path) == (route, model)


def _record(level: int = logging.INFO, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("conveyor.test", level, __file__, 1, "hello %s", ("x",), None)
    record.__dict__.update(extra)
    return record


def test_json_lines_carry_the_extra_fields() -> None:
    line = json.loads(JSONFormatter().format(_record(model="tiny", request_id="r1")))
    assert line["level"] == "INFO"
    assert line["logger"] == "conveyor.test"
    assert line["message"] == "hello x"
    assert line["model"] == "tiny"
    assert line["request_id"] == "r1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])


def test_iso8601_lines_start_with_the_utc_time() -> None:
    text = ISO8601Formatter().format(_record())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO conveyor.test: hello x", text)


@pytest.mark.parametrize(
    ("settings", "passed"),
    [
        (LogSettings(), {"INFO", "WARNING", "ERROR", "CRITICAL"}),
        (LogSettings(log_verbose_level=1), {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}),
        (LogSettings(log_info=False), {"WARNING", "ERROR", "CRITICAL"}),
        (LogSettings(log_warning=False, log_error=False), {"INFO"}),
    ],
)
def test_each_level_has_its_switch(settings: LogSettings, passed: set[str]) -> None:
    switches = LevelSwitches(settings)
    levels = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    assert {n for n in levels if switches.filter(_record(logging.getLevelName(n)))} == passed
