"""Plain Python models: ``model.py`` defines ``class Model`` with ``infer`` (and maybe ``load``).

class Model:
    thread_safe = True          # False: every instance gets its own Model object
    def load(self, config): ...  # optional; self.version_dir is the version's folder
    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conveyor.backends.base import Backend, LoadedModel
from conveyor.errors import ModelError, RepositoryError
from conveyor.repository.config import ModelConfig

_module_ids = itertools.count()


class PythonModel(LoadedModel):
    def __init__(self, name: str, instance: Any) -> None:
        self.name = name
        self.instance = instance
        self.thread_safe = bool(getattr(instance, "thread_safe", True))

    def run(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        produced = self.instance.infer(inputs)
        if not isinstance(produced, dict):
            raise ModelError(
                f"model {self.name!r}: infer() returned {type(produced).__name__}; "
                "expected a dict of output name -> numpy.ndarray"
            )
        return produced

    def close(self) -> None:
        unload = getattr(self.instance, "unload", None)
        if callable(unload):
            unload()


class PythonBackend(Backend):
    name = "python"

    def load(self, config: ModelConfig, version_dir: Path) -> PythonModel:
        path = version_dir / "model.py"
        if not path.exists():
            raise RepositoryError(f"model {config.name!r}: {path} does not exist")
        if not config.inputs or not config.outputs:
            raise RepositoryError(
                f"model {config.name!r}: a python model must declare [[inputs]] and [[outputs]] "
                "in config.toml"
            )
        module_name = f"conveyor_model_{config.name}_{next(_module_ids)}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # lets the model pickle its own classes
        try:
            spec.loader.exec_module(module)
            model_class = getattr(module, "Model", None)
            if model_class is None:
                raise RepositoryError(f"model {config.name!r}: {path.name} defines no class Model")
            instance = model_class()
            instance.version_dir = version_dir
            load = getattr(instance, "load", None)
            if callable(load):
                load(config)
        except RepositoryError:
            sys.modules.pop(module_name, None)
            raise
        except Exception as exc:
            sys.modules.pop(module_name, None)
            raise RepositoryError(
                f"model {config.name!r}: loading {path.name} failed: {type(exc).__name__}: {exc}"
            ) from exc
        return PythonModel(config.name, instance)
