"""Model control from a model's own code (``load_model``, ``unload_model``,
``is_model_ready``): the names exist, and calling one says it is not offered."""

from __future__ import annotations

from typing import Any

from conveyor.triton.pb_utils._errors import unsupported

_WHY = "model control from a model's code; use the server's repository API"


def load_model(model_name: str, config: str = "", files: Any = None) -> None:
    raise unsupported("pb_utils.load_model", _WHY)


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    raise unsupported("pb_utils.unload_model", _WHY)


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    raise unsupported("pb_utils.is_model_ready", _WHY)
