"""Errors that Triton's clients (and their users' tests) match by text start with Triton's
wording, then say Conveyor's own detail; the status codes are Conveyor's as before.
Over HTTP and gRPC, with tritonclient."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests.server.compat.models import WHY
from tests.server.compat.triton_util import client_module


def message_of(call: Callable[[], Any]) -> str:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return str(caught.value.message())


def infer_tiny(client: Any, protocol: str, model: str = "tiny", version: str = "") -> Any:
    module = client_module(protocol)
    x = module.InferInput("INPUT0", [1, 16], "FP32")
    x.set_data_from_numpy(np.zeros((1, 16), np.float32))
    return client.infer(model, [x], model_version=version)


def test_unknown_model(client: Any, protocol: str) -> None:
    for call in (
        lambda: infer_tiny(client, protocol, "nope"),
        lambda: client.get_model_metadata("nope"),
        lambda: client.get_model_config("nope"),
    ):
        message = message_of(call)
        assert message.startswith("Request for unknown model: 'nope' is not found")
        assert "'nope' is not in the repository" in message  # Conveyor's detail stays


def test_unknown_version(client: Any, protocol: str) -> None:
    for call in (
        lambda: infer_tiny(client, protocol, version="7"),
        lambda: client.get_model_metadata("tiny", "7"),
    ):
        message = message_of(call)
        assert message.startswith("Request for unknown model: 'tiny' version 7 is not found")
        assert "has no version 7; loaded versions are 1" in message


def test_malformed_version(client: Any, protocol: str) -> None:
    message = message_of(lambda: client.get_model_metadata("tiny", "one"))
    assert message.startswith("failed to get model version from specified version string 'one'"), (
        message
    )
    assert "version should be an integral value > 0" in message
    assert "model version must be an integer, got 'one'" in message


def test_load_of_a_model_the_repository_does_not_hold(client: Any, protocol: str) -> None:
    message = message_of(lambda: client.load_model("nothing_here"))
    # The text Triton's own lifecycle tests assert on.
    assert message.startswith("failed to load 'nothing_here', failed to poll from model repository")
    assert "'nothing_here' is not in the repository" in message


def test_failed_load_then_requests_for_it(client: Any, protocol: str) -> None:
    message = message_of(lambda: client.load_model("broken"))
    assert message.startswith("load failed for model 'broken'")
    assert "'broken' failed to load" in message and WHY in message
    assert not client.is_model_ready("broken")
    module = client_module(protocol)
    x = module.InferInput("INPUT0", [1, 1], "FP32")
    x.set_data_from_numpy(np.zeros((1, 1), np.float32))
    message = message_of(lambda: client.infer("broken", [x]))
    assert message.startswith("Request for unknown model: 'broken' has no available versions")
    assert "failed to load" in message and WHY in message
