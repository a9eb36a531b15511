"""The trace extension's settings through tritonclient, over HTTP and gRPC alike: every
setting a string (trace_level a list), a model's values over the global ones, clearing
restores them, and bad values are refused naming the setting."""

from __future__ import annotations

from typing import Any

import pytest
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer

PROTOCOLS = ["http", "grpc"]
SETTINGS = {"trace_level", "trace_rate", "trace_count", "log_frequency", "trace_file", "trace_mode"}


def settings_of(protocol: str, answer: Any) -> dict[str, Any]:
    """tritonclient's gRPC answer is the JSON of the message: ``{"settings": {name:
    {"value": [...]}}}``; HTTP's is the map itself. One shape for the assertions."""
    if protocol == "http":
        return dict(answer)
    return {
        name: value.get("value", []) if name == "trace_level" else "".join(value.get("value", []))
        for name, value in answer["settings"].items()
    }


def get(client: Any, protocol: str, model: str | None = None) -> dict[str, Any]:
    kwargs = {"as_json": True} if protocol == "grpc" else {}
    return settings_of(protocol, client.get_trace_settings(model_name=model, **kwargs))


def update(
    client: Any, protocol: str, settings: dict[str, Any], model: str | None = None
) -> dict[str, Any]:
    kwargs = {"as_json": True} if protocol == "grpc" else {}
    answer = client.update_trace_settings(model_name=model, settings=settings, **kwargs)
    return settings_of(protocol, answer)


@pytest.fixture
def reset(clients: dict[str, Any]) -> Any:
    yield
    clear = dict.fromkeys(SETTINGS)
    clients["http"].update_trace_settings(model_name="tiny", settings=clear)
    clients["http"].update_trace_settings(settings=clear)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_defaults_are_triton_s_and_strings(
    clients: dict[str, Any], protocol: str, reset: None
) -> None:
    answer = get(clients[protocol], protocol)
    assert answer == {
        "trace_level": ["OFF"],
        "trace_rate": "1000",
        "trace_count": "-1",
        "log_frequency": "0",
        "trace_file": "",
        "trace_mode": "triton",
    }
    assert get(clients[protocol], protocol, "tiny") == answer


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_model_overrides_global_and_clearing_restores_it(
    clients: dict[str, Any], protocol: str, reset: None
) -> None:
    client = clients[protocol]
    answer = update(client, protocol, {"trace_rate": "7", "trace_mode": "opentelemetry"})
    assert answer["trace_rate"] == "7"
    assert answer["trace_mode"] == "opentelemetry"
    model = update(client, protocol, {"trace_rate": "3", "log_frequency": "2"}, "tiny")
    assert model["trace_rate"] == "3"
    assert model["log_frequency"] == "2"
    assert model["trace_mode"] == "opentelemetry"  # not overridden: the global value
    # The other protocol sees the same settings: they live once, in the server.
    other = "grpc" if protocol == "http" else "http"
    assert get(clients[other], other, "tiny")["trace_rate"] == "3"
    assert get(clients[other], other)["trace_rate"] == "7"
    # A global change shows through where the model has no value of its own.
    update(client, protocol, {"trace_count": "5"})
    assert get(client, protocol, "tiny")["trace_count"] == "5"
    # Clearing the model's value restores the global one; clearing the global, the default.
    assert update(client, protocol, {"trace_rate": None}, "tiny")["trace_rate"] == "7"
    assert update(client, protocol, {"trace_rate": None})["trace_rate"] == "1000"
    assert get(client, protocol, "tiny")["log_frequency"] == "2"


BAD = [
    ({"trace_rate": "abc"}, "trace_rate", "integer >= 1"),
    ({"trace_rate": "0"}, "trace_rate", "integer >= 1"),
    ({"trace_level": ["LOUD"]}, "trace_level", "OFF, TIMESTAMPS, TENSORS"),
    ({"trace_count": "-2"}, "trace_count", ">= -1"),
    ({"log_frequency": "often"}, "log_frequency", ">= 0"),
    ({"trace_mode": "zipkin"}, "trace_mode", "triton, opentelemetry"),
    ({"verbosity": "1"}, "verbosity", "trace_level"),
    # Tracing on in triton mode with nowhere to write.
    ({"trace_level": ["TIMESTAMPS"]}, "trace_file", "--trace-config triton,file=PATH"),
    # A client does not choose which file the server writes.
    ({"trace_file": "/tmp/elsewhere.json"}, "trace_file", "cannot be changed"),
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("settings", "named", "expected"), BAD)
def test_bad_values_are_refused_naming_the_setting(
    clients: dict[str, Any],
    protocol: str,
    settings: dict[str, Any],
    named: str,
    expected: str,
    reset: None,
) -> None:
    client = clients[protocol]
    before = get(client, protocol)
    with pytest.raises(InferenceServerException) as caught:
        update(client, protocol, settings)
    message = caught.value.message()
    assert named in message and expected in message
    status = caught.value.status()
    assert status in ("400", "StatusCode.INVALID_ARGUMENT")
    assert get(client, protocol) == before  # nothing was changed


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unknown_model_is_not_found(clients: dict[str, Any], protocol: str) -> None:
    with pytest.raises(InferenceServerException) as caught:
        get(clients[protocol], protocol, "no-such-model")
    assert "no-such-model" in caught.value.message()
    assert caught.value.status() in ("404", "StatusCode.NOT_FOUND")


def test_server_metadata_lists_the_trace_extension(server: RunningServer, clients: Any) -> None:
    assert "trace" in clients["http"].get_server_metadata()["extensions"]
