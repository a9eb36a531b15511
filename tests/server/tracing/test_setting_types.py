"""Every trace and log setting given a value of every wrong type, over HTTP and gRPC: each
is refused with 400 / INVALID_ARGUMENT naming the setting (never a 500), nothing changes,
and the server goes on serving. Triton's trace settings are strings; tritonclient's clients
send them so, and that form keeps working."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.server.log_settings import EXPECTED as LOG_SETTINGS
from conveyor.server.tracing.settings import NAMES as TRACE_SETTINGS
from conveyor.testing import RunningServer
from tests.server.http.http_util import get_json, request

WRONG_TYPES: list[Any] = [
    5,
    -1,
    2.5,
    10**30,
    True,
    False,
    {},
    {"value": "5"},
    {"5": 1},
    [1],
    ["1", 2],
    [None],
    [[]],
    [{}],
]
# Strings and nulls are the protocol's own types: refused (400) or taken, never a 500.
OTHER_VALUES: list[Any] = [None, [], "", "x", "-5", "9" * 5000, ["TIMESTAMPS", "OFF"], "\u0000"]

# Over gRPC every trace value is a list of strings: only the values can be wrong.
GRPC_TRACE_VALUES = [[], [""], ["x"], ["-2"], ["1", "2"], ["9" * 5000], ["TIMESTAMPS", "OFF"]]


def post(server: RunningServer, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    status, _, data = request(server.http_url, "POST", path, json.dumps(body).encode())
    return status, json.loads(data)


def served(server: RunningServer) -> None:
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [0] * 16}]}
    status, answer = post(server, "/v2/models/tiny/infer", body)
    assert status == 200, answer


@pytest.fixture
def settings_restored(server: RunningServer) -> Iterator[None]:
    """Whatever a test changed is put back (null clears a trace setting and puts a log
    setting back to its start value)."""
    yield
    clear_trace = dict.fromkeys((n for n in TRACE_SETTINGS if n != "trace_file"), None)
    for path in ("/v2/trace/setting", "/v2/models/tiny/trace/setting"):
        assert post(server, path, clear_trace)[0] == 200
    clear_log = dict.fromkeys((n for n in LOG_SETTINGS if n != "log_file"), None)
    assert post(server, "/v2/logging", clear_log)[0] == 200


@pytest.mark.parametrize("path", ["/v2/trace/setting", "/v2/models/tiny/trace/setting"])
def test_trace_settings_of_a_wrong_type_are_400_over_http(
    server: RunningServer, path: str, settings_restored: None
) -> None:
    before = get_json(server.http_url, path)[1]
    for name in TRACE_SETTINGS:
        for value in WRONG_TYPES:
            status, answer = post(server, path, {name: value})
            assert status == 400, (name, value, answer)
            assert f"trace setting {name!r}" in answer["error"], answer
        for value in OTHER_VALUES:
            status, answer = post(server, path, {name: value})
            assert status in (200, 400), (name, value, answer)
    # A refused update changed nothing (and a null or empty one only cleared what was
    # clear already); the server serves on.
    assert get_json(server.http_url, path)[1] == before
    served(server)


def test_a_number_names_the_setting_and_the_string_form(
    server: RunningServer, settings_restored: None
) -> None:
    status, answer = post(server, "/v2/trace/setting", {"log_frequency": 5})
    assert status == 400
    assert answer["error"] == (
        "trace setting 'log_frequency' must be a string, e.g. \"0\" (or null to clear it), "
        "got the number 5"
    )
    status, answer = post(server, "/v2/trace/setting", {"trace_level": {"TIMESTAMPS": 1}})
    assert status == 400 and 'a list of strings, e.g. ["TIMESTAMPS"]' in answer["error"]
    # The string form, as Triton's clients send it, is taken.
    status, answer = post(server, "/v2/trace/setting", {"log_frequency": "5"})
    assert status == 200 and answer["log_frequency"] == "5"


def test_tritonclient_updates_trace_settings(
    clients: dict[str, Any], settings_restored: None
) -> None:
    http, grpc_client = clients["http"], clients["grpc"]
    answer = http.update_trace_settings(settings={"trace_rate": "7", "log_frequency": "3"})
    assert answer["trace_rate"] == "7" and answer["log_frequency"] == "3"
    answer = grpc_client.update_trace_settings(
        model_name="tiny", settings={"trace_count": "9"}, as_json=True
    )
    assert answer["settings"]["trace_count"]["value"] == ["9"]


def test_log_settings_of_a_wrong_type_are_400_over_http(
    server: RunningServer, settings_restored: None
) -> None:
    before = get_json(server.http_url, "/v2/logging")[1]
    for name in LOG_SETTINGS:
        for value in [*WRONG_TYPES, "x", "9" * 5000, []]:
            if name == "log_verbose_level" and type(value) is int and value >= 0:
                continue  # a level: taken
            if name in ("log_info", "log_warning", "log_error", "access_log") and isinstance(
                value, bool
            ):
                continue
            status, answer = post(server, "/v2/logging", {name: value})
            assert status == 400, (name, value, answer)
            assert f"log setting {name!r}" in answer["error"], answer
    assert get_json(server.http_url, "/v2/logging")[1] == before
    served(server)


def grpc_call(server: RunningServer, method: str, message: Any, answer: Any) -> Any:
    with grpc.insecure_channel(server.grpc_url.removeprefix("grpc://")) as channel:
        call = channel.unary_unary(
            f"/inference.GRPCInferenceService/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=answer.FromString,
        )
        return call(message, timeout=10)


@pytest.mark.parametrize("model", ["", "tiny"])
def test_trace_settings_over_grpc_are_never_internal(
    server: RunningServer, model: str, settings_restored: None
) -> None:
    for name in TRACE_SETTINGS:
        for values in GRPC_TRACE_VALUES:
            message = pb.TraceSettingRequest(model_name=model)
            message.settings[name].value.extend(values)
            try:
                grpc_call(server, "TraceSetting", message, pb.TraceSettingResponse)
            except grpc.RpcError as exc:
                code = exc.code()
                assert code in (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    grpc.StatusCode.UNIMPLEMENTED,  # trace_file: set only at start
                ), (name, values, exc)
                assert name in (exc.details() or ""), exc
    served(server)


def test_log_settings_of_a_wrong_type_are_invalid_argument_over_grpc(
    server: RunningServer, settings_restored: None
) -> None:
    wrong = {"bool_param": True, "uint32_param": 3, "string_param": "x"}
    right = {
        "log_file": "string_param",
        "log_info": "bool_param",
        "log_warning": "bool_param",
        "log_error": "bool_param",
        "access_log": "bool_param",
        "log_verbose_level": "uint32_param",
        "log_format": "string_param",
    }
    for name in LOG_SETTINGS:
        for field, value in wrong.items():
            if field == right[name]:
                continue
            message = pb.LogSettingsRequest()
            setattr(message.settings[name], field, value)
            with pytest.raises(grpc.RpcError) as caught:
                grpc_call(server, "LogSettings", message, pb.LogSettingsResponse)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, field)
            assert f"log setting {name!r}" in (caught.value.details() or "")
    served(server)
