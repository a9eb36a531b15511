"""The ``conveyor`` command as a user types it: help text, and options in either place."""

from __future__ import annotations

import re
import subprocess
import sys

from conveyor.examples import onnx_models
from conveyor.testing import run_server
from tests.server.http.http_util import get_json


def conveyor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conveyor", *args], capture_output=True, text=True, timeout=60
    )


def test_help_is_plain_text_and_lists_every_command() -> None:
    out = conveyor("--help")
    assert out.returncode == 0
    assert "``" not in out.stdout
    assert "HTTP and gRPC" in out.stdout
    for command in ("conveyor serve", "conveyor models", "conveyor bench"):
        assert command in out.stdout
    assert "--log-level may come before or after the command" in out.stdout


def test_log_level_works_after_the_command(tmp_path) -> None:
    onnx_models.tiny(tmp_path / "tiny" / "1" / "model.onnx")
    with run_server(tmp_path, extra_args=["--log-level", "debug"]) as server:
        status, _ = get_json(server.http_url, "/v2/models/tiny")
        assert status == 200
        assert server.stop() == 0
        assert "DEBUG " in server.output()
    for args in (
        ["models", str(tmp_path), "--log-level", "error"],
        ["--log-level", "error", "models", str(tmp_path)],
    ):
        out = conveyor(*args)
        assert out.returncode == 0, out.stderr
        assert "tiny" in out.stdout


def test_log_level_after_bench_is_taken_too() -> None:
    out = conveyor("bench", "--log-level", "debug", "--help")
    assert out.returncode == 0, out.stderr
    assert "unrecognized arguments" not in out.stderr


def test_an_unknown_log_level_is_refused_in_words() -> None:
    out = conveyor("models", "--log-level", "loud")
    assert out.returncode == 2
    assert "--log-level must be one of debug, info, warning, error" in out.stderr
    assert "Traceback" not in out.stderr


def test_version_prints_the_package_version() -> None:
    from conveyor._version import package_version

    out = conveyor("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"conveyor {package_version()}\n"
    assert re.fullmatch(r"conveyor \d+\.\d+\.\d+\S*\n", out.stdout)
    assert "--version" in conveyor("--help").stdout


def test_bench_usage_shows_its_subcommands() -> None:
    out = conveyor("bench", "--help")
    assert out.returncode == 0, out.stderr
    usage = out.stdout.split("\n\n")[0]  # the usage lines, before the description
    assert usage.startswith("usage: conveyor bench [-h]")
    assert "conveyor bench plot REPORT.json [REPORT.json ...] -o OUT.png" in usage
    assert "conveyor bench ceiling" in usage
    # The lines name forms that work: each subcommand answers its own --help.
    for sub in ("plot", "ceiling"):
        assert conveyor("bench", sub, "--help").stdout.startswith(f"usage: conveyor bench {sub}")
