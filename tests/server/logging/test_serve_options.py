"""``conveyor serve``'s logging options, each on a server of its own: the JSON format, the
log file, the start values the extension reports, and values the command line refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor import cli
from conveyor.server.settings import Settings
from conveyor.testing import run_server
from tests.polling import wait_until
from tests.server.logging.log_util import Output, json_lines


def test_json_lines_have_the_fields() -> None:
    args = ["--log-format", "json", "--access-log", "--log-verbose", "1", "--no-log-warning"]
    with run_server(extra_args=args) as server:
        output = Output(server)
        http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        grpc = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
        assert http.get_log_settings() == {
            "log_file": "",
            "log_info": True,
            "log_warning": False,
            "log_error": True,
            "log_verbose_level": 1,
            "log_format": "json",
            "access_log": True,
        }
        tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
        tensor.set_data_from_numpy(np.ones((1, 16), np.float32))
        http.infer("tiny", [tensor], request_id="json-http")
        grpc_tensor = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
        grpc_tensor.set_data_from_numpy(np.ones((1, 16), np.float32))
        grpc.infer("tiny", [grpc_tensor], request_id="json-grpc")
        output.wait_for('"request_id": "json-grpc"')
        startup = json_lines(server.output())
    # Every conveyor line is JSON (a line from another library may not be).
    assert any(line["message"].startswith("ready: serving") for line in startup), startup
    for line in startup:
        assert {"time", "level", "logger", "message"} <= set(line), line
        assert line["logger"].startswith("conveyor")
    access = {
        line.get("request_id"): line for line in startup if line["logger"] == "conveyor.access"
    }
    assert access["json-http"] | {"latency_ms": 0} == access["json-http"] | {
        "level": "INFO",
        "protocol": "http",
        "method": "POST",
        "route": "/v2/models/{model}/infer",
        "model": "tiny",
        "status": "200",
        "latency_ms": 0,
    }
    assert access["json-grpc"]["status"] == "OK"
    assert access["json-grpc"]["method"] == "ModelInfer"
    assert access["json-grpc"]["model"] == "tiny"
    assert access["json-http"]["latency_ms"] >= 0


def test_log_file_takes_the_lines(tmp_path: Path) -> None:
    log_file = tmp_path / "server.log"
    with run_server(extra_args=["--log-file", str(log_file)]) as server:
        http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        assert http.get_log_settings()["log_file"] == str(log_file)
        wait_until(
            lambda: "INFO conveyor.server: ready: serving" in log_file.read_text(),
            what="the ready line in the log file",
        )
        assert "conveyor.server: ready" not in server.output()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["serve", "--log-verbose", "-1"], "log_verbose must be >= 0, got -1"),
    ],
)
def test_refused_values(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert words in capsys.readouterr().err


def test_unknown_format_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "--log-format", "xml"])
    assert exited.value.code == 2
    assert "--log-format: invalid choice: 'xml'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("level", "changed"),
    [
        ("debug", {"log_verbose": 1}),
        ("info", {}),
        ("warning", {"log_info": False}),
        ("error", {"log_info": False, "log_warning": False}),
    ],
)
def test_log_level_is_the_start_of_the_switches(level: str, changed: dict[str, object]) -> None:
    assert Settings().with_log_level(level) == Settings(**changed)  # type: ignore[arg-type]


def test_a_log_file_that_cannot_be_opened_stops_the_start(tmp_path: Path) -> None:
    with run_server(extra_args=["--log-file", str(tmp_path / "no-such-dir" / "x.log")],
                    wait=False) as server:  # fmt: skip
        assert server.process.wait(60) == 1
        assert "conveyor serve: cannot write the log file: " in server.output()
