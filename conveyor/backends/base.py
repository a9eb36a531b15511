"""The one interface a backend implements: complete a config from a model file, load, run.

A backend is picked by name (``backend = "onnxruntime"`` in config.toml) from the registry in
``conveyor.backends``; the engine only ever talks to these two small classes.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from conveyor.repository.config import ModelConfig


class LoadedModel(abc.ABC):
    """One loaded copy of a model version.

    When ``thread_safe`` is true the engine loads the model once and calls ``run`` from all
    of the model's instance threads at once, so every instance shares the same weights.
    """

    thread_safe: bool = False

    @abc.abstractmethod
    def run(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        """Run one (possibly batched) execution; return at least the named outputs."""

    def close(self) -> None:  # noqa: B027 - optional hook; most models need no cleanup
        """Release what ``load`` acquired."""


class Backend(abc.ABC):
    name: str

    def complete_config(self, config: ModelConfig, model: LoadedModel) -> ModelConfig:
        """Fill in what the config leaves out (inputs, outputs) from the loaded model itself."""
        return config

    @abc.abstractmethod
    def load(self, config: ModelConfig, version_dir: Path) -> LoadedModel:
        """Load the model version in ``version_dir``; raise with a reason on failure."""
