"""Settings: defaults written once, and the model-control enum on the command line."""

from __future__ import annotations

import argparse
import inspect

import pytest

from conveyor import ModelControl
from conveyor.client._base import DEFAULT_CALL_TIMEOUT_S
from conveyor.client.grpc import GRPCClient
from conveyor.client.http import HTTPClient
from conveyor.protocol.limits import DEFAULT_MAX_MESSAGE_BYTES
from conveyor.server import metrics_port
from conveyor.server.grpc.server import GRPCFrontEnd, GrpcListen
from conveyor.server.http import listener
from conveyor.server.settings import Settings, add_arguments, from_arguments


def _parse(*argv: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_arguments(parser.parse_args(argv))


def test_model_control_is_an_enum_from_the_command_line_or_a_string():
    assert _parse().model_control is ModelControl.NONE
    parsed = _parse("--model-control", "explicit", "--load-model", "tiny")
    assert parsed.model_control is ModelControl.EXPLICIT
    given = Settings(model_control="explicit")  # type: ignore[arg-type]
    assert given.model_control is ModelControl.EXPLICIT
    with pytest.raises(SystemExit):
        _parse("--model-control", "sometimes")
    with pytest.raises(ValueError, match="model_control must be one of none, explicit"):
        Settings(model_control="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--load-model needs --model-control explicit"):
        _parse("--load-model", "tiny")


def _default(function: object, name: str) -> object:
    return inspect.signature(function).parameters[name].default  # type: ignore[arg-type]


def test_each_default_is_the_settings_default():
    settings = Settings()
    assert settings.max_body_bytes == settings.grpc_max_message_bytes == 64 * 1024 * 1024
    assert settings.grpc_max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES
    assert GrpcListen("h", 1).max_message_bytes == settings.grpc_max_message_bytes
    assert _default(GRPCFrontEnd, "max_message_bytes") == settings.grpc_max_message_bytes
    assert _default(GRPCClient, "max_message_bytes") == settings.grpc_max_message_bytes
    http = listener.HTTPToolsFrontEnd
    assert _default(http, "header_timeout") == settings.http_header_timeout == 10.0
    assert _default(http, "body_timeout") == settings.http_body_timeout == 30.0
    assert _default(http, "keep_alive_timeout") == settings.http_keep_alive_timeout == 30.0
    assert _default(http, "backlog") == settings.backlog == 2048
    assert _default(metrics_port.metrics_front_end, "backlog") == settings.backlog
    assert settings.drain_timeout == 30.0
    assert _default(GRPCClient, "call_timeout") == _default(HTTPClient, "call_timeout")
    assert _default(HTTPClient, "call_timeout") == DEFAULT_CALL_TIMEOUT_S == 300.0
