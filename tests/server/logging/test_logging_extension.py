"""Triton's logging extension on a real server, through tritonclient over HTTP and gRPC:
get and update, bad values refused by name, and each change visible in the server's output.
"""

from __future__ import annotations

import re
from typing import Any

import grpc as grpclib
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc.methods import METHODS
from conveyor.testing import RunningServer
from tests.server.logging.log_util import Output

START = {
    "log_file": "",
    "log_info": True,
    "log_warning": True,
    "log_error": True,
    "log_verbose_level": 0,
    "log_format": "default",
    "access_log": False,
}
READY_LINE = "INFO conveyor.engine: model 'tiny' version 1 ready"


def grpc_values(response: Any) -> dict[str, Any]:
    """A LogSettingsResponse as Triton's JSON form (name -> plain value)."""
    return {
        name: getattr(value, value.WhichOneof("parameter_choice"))
        for name, value in response.settings.items()
    }


def test_get_over_both_protocols(
    http: httpclient.InferenceServerClient, grpc: grpcclient.InferenceServerClient
) -> None:
    assert http.get_log_settings() == START
    assert grpc_values(grpc.get_log_settings()) == START
    assert "logging" in http.get_server_metadata()["extensions"]


def test_an_update_over_one_protocol_is_seen_over_the_other(
    http: httpclient.InferenceServerClient, grpc: grpcclient.InferenceServerClient
) -> None:
    answer = http.update_log_settings({"log_verbose_level": 2, "log_warning": False})
    assert answer == {**START, "log_verbose_level": 2, "log_warning": False}
    assert grpc_values(grpc.get_log_settings()) == answer
    answer = grpc_values(grpc.update_log_settings({"log_format": "ISO8601", "log_warning": True}))
    assert answer == {**START, "log_verbose_level": 2, "log_format": "ISO8601"}
    assert http.get_log_settings() == answer
    # None (an unset gRPC value): back to what the server started with.
    assert grpc_values(grpc.update_log_settings({"log_verbose_level": None})) == {
        **START,
        "log_format": "ISO8601",
    }


BAD = [
    ({"log_colour": True}, "unknown log setting 'log_colour'"),
    ({"log_format": "xml"}, "'log_format' must be one of 'default', 'ISO8601', 'json', got 'xml'"),
]


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        *BAD,
        ({"log_info": "maybe"}, "'log_info' must be true or false, got 'maybe'"),
        ({"log_verbose_level": -1}, "'log_verbose_level' must be an integer >= 0, got -1"),
    ],
)
def test_bad_values_over_http(
    http: httpclient.InferenceServerClient, changes: dict[str, Any], words: str
) -> None:
    with pytest.raises(InferenceServerException) as raised:
        http.update_log_settings({"log_info": False, **changes})
    assert raised.value.status() == "400"
    assert words in raised.value.message()
    assert http.get_log_settings() == START  # nothing of a refused update was applied


@pytest.mark.parametrize(("changes", "words"), BAD)
def test_bad_values_over_grpc(
    http: httpclient.InferenceServerClient,
    grpc: grpcclient.InferenceServerClient,
    changes: dict[str, Any],
    words: str,
) -> None:
    with pytest.raises(InferenceServerException) as raised:
        grpc.update_log_settings(changes)
    assert raised.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert words in raised.value.message()


def _set(name: str, **value: Any) -> pb.LogSettingsRequest:
    request = pb.LogSettingsRequest()
    request.settings[name].CopyFrom(pb.LogSettingsRequest.SettingValue(**value))
    return request


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        # Values tritonclient would not send, sent as raw messages: the wrong type each.
        (_set("log_info", string_param="maybe"), "'log_info' must be true or false"),
        (_set("log_verbose_level", bool_param=True), "'log_verbose_level' must be an integer"),
        (_set("log_format", uint32_param=1), "'log_format' must be one of"),
    ],
)
def test_wrong_value_types_over_grpc(
    server: RunningServer,
    http: httpclient.InferenceServerClient,
    request_: pb.LogSettingsRequest,
    words: str,
) -> None:
    method = METHODS["LogSettings"]
    with grpclib.insecure_channel(server.grpc_url.removeprefix("grpc://")) as channel:
        call = channel.unary_unary(
            method.path,
            request_serializer=pb.LogSettingsRequest.SerializeToString,
            response_deserializer=pb.LogSettingsResponse.FromString,
        )
        with pytest.raises(grpclib.RpcError) as raised:
            call(request_, timeout=10)
    assert raised.value.code() == grpclib.StatusCode.INVALID_ARGUMENT
    assert words in (raised.value.details() or "")


def test_log_file_is_not_changed_by_a_client(
    http: httpclient.InferenceServerClient, grpc: grpcclient.InferenceServerClient, tmp_path: Any
) -> None:
    target = str(tmp_path / "elsewhere.log")
    with pytest.raises(InferenceServerException, match="'log_file' cannot be changed") as raised:
        http.update_log_settings({"log_file": target})
    assert raised.value.status() == "400"
    with pytest.raises(InferenceServerException, match="'log_file' cannot be changed") as raised:
        grpc.update_log_settings({"log_file": target})
    assert raised.value.status() == "StatusCode.UNIMPLEMENTED"  # Triton's answer too
    assert not (tmp_path / "elsewhere.log").exists()
    # Sending back the settings as read (the same file) is not a change: accepted.
    assert http.update_log_settings(http.get_log_settings()) == START


def test_verbose_level_turns_debug_lines_on_and_off(
    server: RunningServer, http: httpclient.InferenceServerClient
) -> None:
    output = Output(server)
    http.update_log_settings({"log_verbose_level": 1})
    http.load_model("tiny")
    http.update_log_settings({"log_verbose_level": 0})
    http.load_model("tiny")
    output.wait_for(READY_LINE)
    lines = output.lines()
    debug = [n for n, line in enumerate(lines) if line.startswith("DEBUG conveyor.server:")]
    ready = [n for n, line in enumerate(lines) if line == READY_LINE]
    assert "DEBUG conveyor.server: loading model 'tiny' at a client's request" in lines
    assert len(ready) == 2, lines
    assert debug and max(debug) < ready[1], lines  # none after verbose went back to 0


def test_log_info_false_hides_info_lines(
    server: RunningServer,
    http: httpclient.InferenceServerClient,
    grpc: grpcclient.InferenceServerClient,
) -> None:
    output = Output(server)
    grpc.update_log_settings({"log_info": False})
    grpc.load_model("tiny")  # would log READY_LINE
    grpc.update_log_settings({"log_info": True})
    grpc.load_model("tiny")
    output.wait_for(READY_LINE)
    assert output.lines().count(READY_LINE) == 1, output.text()


def test_log_format_changes_the_next_lines(
    server: RunningServer, http: httpclient.InferenceServerClient
) -> None:
    output = Output(server)
    http.update_log_settings({"log_format": "ISO8601"})
    http.load_model("tiny")
    output.wait_for(READY_LINE.removeprefix("INFO "))
    (line,) = [line for line in output.lines() if "version 1 ready" in line]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z " + re.escape(READY_LINE), line)


def _http_infer(client: httpclient.InferenceServerClient, model: str, request_id: str) -> None:
    tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 16), np.float32))
    client.infer(model, [tensor], request_id=request_id)


def _grpc_infer(client: grpcclient.InferenceServerClient, model: str, request_id: str) -> None:
    tensor = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 16), np.float32))
    client.infer(model, [tensor], request_id=request_id)


def test_access_log_lines_for_http_and_grpc(
    server: RunningServer,
    http: httpclient.InferenceServerClient,
    grpc: grpcclient.InferenceServerClient,
) -> None:
    output = Output(server)
    _http_infer(http, "tiny", "before-on")  # off: no line
    grpc.update_log_settings({"access_log": True})
    _http_infer(http, "tiny", "h-1")
    with pytest.raises(InferenceServerException):
        _http_infer(http, "no-such", "h-2")
    _grpc_infer(grpc, "tiny", "g-1")
    with pytest.raises(InferenceServerException):
        _grpc_infer(grpc, "no-such", "g-2")
    grpc.get_model_metadata("tiny")
    http.update_log_settings({"access_log": False})
    _http_infer(http, "tiny", "after-off")  # off again: no line
    http.get_server_metadata()
    grpc.update_log_settings({"access_log": True})  # checked as it starts: not logged
    grpc.get_model_config("tiny")  # a fence: logged once every line above was written
    output.wait_for("grpc ModelConfig")
    access = [line for line in output.lines() if line.startswith("INFO conveyor.access: ")]
    text = "\n".join(access)
    assert "before-on" not in text and "after-off" not in text, text
    expected = [
        r"http POST /v2/models/\{model\}/infer model=tiny status=200 latency_ms=[\d.]+ "
        r"request_id=h-1",
        r"http POST /v2/models/\{model\}/infer model=no-such status=404 latency_ms=[\d.]+ "
        r"request_id=-",
        r"grpc ModelInfer \S+/ModelInfer model=tiny status=OK latency_ms=[\d.]+ request_id=g-1",
        r"grpc ModelInfer \S+/ModelInfer model=no-such status=NOT_FOUND latency_ms=[\d.]+ "
        r"request_id=g-2",
        r"grpc ModelMetadata \S+ model=tiny status=OK",
        r"http POST /v2/logging model=- status=200",
    ]
    for pattern in expected:
        assert re.search(pattern, text), (pattern, text)
