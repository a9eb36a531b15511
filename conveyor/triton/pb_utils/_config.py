"""What a model reads its config with: ``ModelConfig`` (edited by ``auto_complete_config``)
and the lookups over the config's JSON that ``initialize(args)`` gets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from conveyor.triton.pb_utils._errors import TritonModelException


def get_input_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return next((e for e in model_config.get("input", []) if e.get("name") == name), None)


def get_output_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return next((e for e in model_config.get("output", []) if e.get("name") == name), None)


def using_decoupled_model_transaction_policy(model_config: Mapping[str, Any]) -> bool:
    """Whether the config declares ``model_transaction_policy { decoupled: true }``."""
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


class ModelConfig:
    """What ``auto_complete_config`` gets: the model's config in Triton's JSON shape, to edit.

    Only what Conveyor serves a model by is read back: inputs, outputs, max_batch_size and
    dynamic batching.
    """

    def __init__(self, model_config: Mapping[str, Any] | str) -> None:
        self._config: dict[str, Any] = (
            json.loads(model_config) if isinstance(model_config, str) else dict(model_config)
        )

    def as_dict(self) -> dict[str, Any]:
        return self._config

    def set_max_batch_size(self, max_batch_size: int) -> None:
        if not isinstance(max_batch_size, int) or max_batch_size < 0:
            raise TritonModelException(
                f"set_max_batch_size: expected an integer >= 0, got {max_batch_size!r}"
            )
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        self._config.setdefault("dynamic_batching", {})

    def add_input(self, input: Mapping[str, Any]) -> None:
        self._add("input", input)

    def add_output(self, output: Mapping[str, Any]) -> None:
        self._add("output", output)

    def set_model_transaction_policy(self, policy: Mapping[str, Any]) -> None:
        self._config["model_transaction_policy"] = {"decoupled": bool(policy.get("decoupled"))}

    def _add(self, section: str, tensor: Mapping[str, Any]) -> None:
        missing = [key for key in ("name", "data_type", "dims") if key not in tensor]
        if missing:
            raise TritonModelException(
                f"add_{section}: {dict(tensor)!r} needs a {missing[0]!r} (name, data_type, dims)"
            )
        existing = self._config.setdefault(section, [])
        for entry in existing:
            if entry["name"] != tensor["name"]:
                continue
            for key in ("data_type", "dims"):
                if list(np.atleast_1d(entry[key])) != list(np.atleast_1d(tensor[key])):
                    raise TritonModelException(
                        f"add_{section}: {section} {tensor['name']!r} has {key} {entry[key]!r} "
                        f"in the config, but auto_complete_config gave {tensor[key]!r}"
                    )
            return
        existing.append(dict(tensor))
