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


class ConfigError(TritonModelException, ValueError):
    """A ``ModelConfig`` edit that contradicts the config (a ValueError, as Triton's)."""


class ModelConfig:
    """What ``auto_complete_config`` gets: the model's config in Triton's JSON shape, to edit.

    Only what Conveyor serves a model by is read back: inputs, outputs, max_batch_size,
    dynamic batching and the transaction policy. Edits that contradict what the config
    says raise a ValueError, as Triton's do.
    """

    def __init__(self, model_config: Mapping[str, Any] | str) -> None:
        self._model_config: dict[str, Any] = (
            json.loads(model_config) if isinstance(model_config, str) else dict(model_config)
        )

    def as_dict(self) -> dict[str, Any]:
        return self._model_config

    def _name(self) -> str:
        return str(self._model_config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        if not isinstance(max_batch_size, int) or max_batch_size < 0:
            raise ConfigError(
                f"set_max_batch_size: expected an integer >= 0, got {max_batch_size!r}"
            )
        configured = int(self._model_config.get("max_batch_size", 0))
        if configured > max_batch_size:
            raise ConfigError(
                f"configuration specified max_batch_size {configured}, but in "
                f"auto-complete-config function for model '{self._name()}' specified "
                f"max_batch_size {max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for scheduler in ("sequence_batching", "ensemble_scheduling"):
            if scheduler in self._model_config:
                raise ConfigError(
                    f"Configuration specified scheduling_choice as '{scheduler}', but "
                    f"auto-complete-config function for model '{self._name()}' tries to set "
                    "scheduling_choice as 'dynamic_batching'"
                )
        self._model_config.setdefault("dynamic_batching", {})

    def add_input(self, input: Mapping[str, Any]) -> None:
        self._add("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output: Mapping[str, Any]) -> None:
        self._add("output", output, ("name", "data_type", "dims"))

    def set_model_transaction_policy(self, transaction_policy_dict: Mapping[str, Any]) -> None:
        unknown = [key for key in transaction_policy_dict if key != "decoupled"]
        if unknown:
            raise ConfigError(
                f"model transaction property in auto-complete-config function for model "
                f"'{self._name()}' contains property other than 'decoupled': {unknown[0]!r}"
            )
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" not in transaction_policy_dict:
            return
        wanted = bool(transaction_policy_dict["decoupled"])
        if "decoupled" in policy and bool(policy["decoupled"]) != wanted:
            raise ConfigError(
                f"trying to change decoupled property in auto-complete-config for model "
                f"'{self._name()}', which is already set to '{policy['decoupled']}'"
            )
        policy["decoupled"] = wanted

    def _add(self, section: str, tensor: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        unknown = [key for key in tensor if key not in allowed]
        if unknown:
            raise ConfigError(
                f"add_{section}: {section} {tensor.get('name')!r} has {unknown[0]!r}; "
                f"expected only {', '.join(allowed)}"
            )
        missing = [key for key in ("name", "data_type", "dims") if key not in tensor]
        if missing:
            raise ConfigError(
                f"add_{section}: {dict(tensor)!r} needs a {missing[0]!r} (name, data_type, dims)"
            )
        existing = self._model_config.setdefault(section, [])
        for entry in existing:
            if entry["name"] != tensor["name"]:
                continue
            # What the config leaves open (no data type, no dims) the model fills in; what
            # it says must agree.
            if entry.get("data_type", "TYPE_INVALID") not in ("TYPE_INVALID", tensor["data_type"]):
                raise ConfigError(
                    f"add_{section}: {section} {tensor['name']!r} has data_type "
                    f"{entry['data_type']!r} in the config, but auto_complete_config gave "
                    f"{tensor['data_type']!r}"
                )
            dims = list(np.atleast_1d(entry.get("dims", [])))
            if dims and dims != list(np.atleast_1d(tensor["dims"])):
                raise ConfigError(
                    f"add_{section}: {section} {tensor['name']!r} has dims {entry['dims']!r} "
                    f"in the config, but auto_complete_config gave {tensor['dims']!r}"
                )
            entry.update(tensor)
            return
        existing.append(dict(tensor))
