"""A load that carries a config or files (tritonclient's ``load_model(config=, files=)``)
gets the same clear refusal on both protocols: 400 / INVALID_ARGUMENT, "load with a config
override is not supported: ...". The model already served is left as it was."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tritonclient.utils import InferenceServerException

from tests.server.compat.triton_util import bad_request_status

CONFIG = json.dumps({"backend": "python", "max_batch_size": 2})


@pytest.mark.parametrize(
    "overrides",
    [
        {"config": CONFIG},
        {"config": CONFIG, "files": {"file:1/model.py": b"class Model: pass\n"}},
    ],
    ids=["config", "config+files"],
)
def test_load_with_an_override_is_refused(
    client: Any, protocol: str, overrides: dict[str, Any]
) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("scores", **overrides)
    message = caught.value.message()
    assert message.startswith("load with a config override is not supported: ")
    assert "'config'" in message and "not supported" in message
    if "files" in overrides:
        assert "'file:1/model.py'" in message
    assert caught.value.status() == bad_request_status(protocol)
    assert client.is_model_ready("scores")  # nothing was reloaded
