"""Plain Python models: ``model.py`` defines ``class Model`` with ``infer`` (and maybe ``load``).

class Model:
    thread_safe = True          # False: every instance gets its own Model object
    def load(self, config): ...  # optional; self.version_dir is the version's folder
    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

A decoupled model (``decoupled = true`` in config.toml) answers with many responses: its
``infer`` is a generator (or async generator) that yields one dict per response.
A stateful model (``sequence_batching`` in its config) may take ``infer(self, inputs,
sequence)``: it is then called request by request, ``sequence`` a SequenceInfo (``id``,
``start``, ``end``), so it can keep its own state per sequence id.

A ``model.py`` written for Triton's Python backend (``class TritonPythonModel``) runs
unchanged through the adapter in :mod:`conveyor.backends.python_triton`.

model.py may import modules and packages beside it (``from helpers import f`` or
``from . import helpers``); each model gets its own, even when two models' helpers share a name.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import itertools
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from conveyor.backends.base import Backend, LoadedModel, ModelCaller, RequestData, Responses
from conveyor.backends.python_triton import (
    TritonModel,
    TritonProcessModel,
    load_triton_model,
    pb_utils_importable,
)
from conveyor.errors import ModelError, RepositoryError
from conveyor.repository.config import InstanceKind, ModelConfig


class PythonModel(LoadedModel):
    def __init__(self, name: str, instance: Any) -> None:
        self.name = name
        self.instance = instance
        self.thread_safe = bool(getattr(instance, "thread_safe", True))
        # ``infer(inputs, sequence)``: each request needs its own sequence, so run one by one.
        self.separate_requests = _takes_sequence(instance.infer)

    def run(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        return self._checked(self.instance.infer(inputs))

    def run_requests(
        self, requests: Sequence[RequestData]
    ) -> list[dict[str, np.ndarray] | Exception]:
        outcomes: list[dict[str, np.ndarray] | Exception] = []
        for request in requests:
            try:  # one request's failure is its own (other sequences are unaffected)
                produced = self.instance.infer(request.inputs, sequence=request.sequence)
                outcomes.append(self._checked(produced))
            except Exception as exc:
                outcomes.append(exc)
        return outcomes

    def _checked(self, produced: object) -> dict[str, np.ndarray]:
        if not isinstance(produced, dict):
            raise ModelError(
                f"model {self.name!r}: infer() returned {type(produced).__name__}; "
                "expected a dict of output name -> numpy.ndarray"
            )
        return produced

    def run_stream(self, request: RequestData, responses: Responses) -> None:
        """A decoupled model's ``infer`` is a generator (or async generator) of responses;
        one that returns a dict answers once. Closing the generator stops it at its yield."""
        produced: Any = self.instance.infer(request.inputs)
        if inspect.isasyncgen(produced):
            asyncio.run(_send_async(produced, responses))
        elif isinstance(produced, dict):
            responses.send(produced)
        elif inspect.isgenerator(produced):
            outputs: Any
            try:
                for outputs in produced:
                    responses.send(outputs)
            finally:
                produced.close()  # a consumer that went away: GeneratorExit at its yield
        else:
            raise ModelError(
                f"model {self.name!r}: infer() returned {type(produced).__name__}; a decoupled "
                "model's infer is a generator (or async generator) of dicts of output arrays"
            )
        responses.close()

    def close(self) -> None:
        unload = getattr(self.instance, "unload", None)
        if callable(unload):
            unload()


async def _send_async(produced: Any, responses: Responses) -> None:
    try:
        async for outputs in produced:
            responses.send(outputs)
    finally:
        await produced.aclose()


def _takes_sequence(infer: Any) -> bool:
    try:
        return "sequence" in inspect.signature(infer).parameters
    except (TypeError, ValueError):
        return False


class PythonBackend(Backend):
    name = "python"

    def __init__(self) -> None:
        # Loads of one model version so far: a model that is not thread-safe is loaded once
        # per instance, in instance order, and a Triton model's instance is named by it.
        self._loads = 0

    def load(
        self, config: ModelConfig, version_dir: Path, *, caller: ModelCaller | None = None
    ) -> LoadedModel:
        path = version_dir / (config.model_filename or "model.py")
        if not path.exists():
            raise RepositoryError(f"model {config.name!r}: {path} does not exist")
        package = _package_name(config.name)
        index, self._loads = self._loads, self._loads + 1
        loaded: LoadedModel
        try:
            with _own_modules(package, version_dir), pb_utils_importable():
                module = _import_model(package, path)
                model_class = getattr(module, "Model", None)
                triton_class = getattr(module, "TritonPythonModel", None)
                if model_class is None and triton_class is not None:
                    loaded = load_triton_model(config, version_dir, triton_class, caller, index)
                else:
                    loaded = _load_model_class(config, version_dir, path, model_class)
        except RepositoryError:
            _forget(package)
            raise
        except Exception as exc:
            _forget(package)
            error = RepositoryError(
                f"model {config.name!r}: loading {path.name} failed: {type(exc).__name__}: {exc}"
            )
            # File and line of the failure, for the server log (see conveyor.engine.failures).
            error.model_traceback = "".join(traceback.format_exception(exc))
            raise error from exc
        return loaded

    def complete_config(self, config: ModelConfig, model: LoadedModel) -> ModelConfig:
        # A Triton model's auto_complete_config may have filled in inputs and outputs.
        return model.config if isinstance(model, TritonModel | TritonProcessModel) else config


def _load_model_class(
    config: ModelConfig, version_dir: Path, path: Path, model_class: Any
) -> PythonModel:
    if model_class is None:
        raise RepositoryError(
            f"model {config.name!r}: {path.name} defines no class Model (nor TritonPythonModel)"
        )
    if not config.inputs or not config.outputs:
        raise RepositoryError(
            f"model {config.name!r}: a python model must declare [[inputs]] and [[outputs]] "
            "in config.toml (input and output in config.pbtxt)"
        )
    instance = model_class()
    if config.instance_kind is InstanceKind.PROCESS and _takes_sequence(instance.infer):
        # A worker process is given joined inputs, not each request's sequence.
        raise RepositoryError(
            f"model {config.name!r}: infer(inputs, sequence) runs on thread instances only; "
            'set instance_kind = "thread", or read the sequence from control inputs '
            "([sequence_batching.controls]) with infer(inputs)"
        )
    instance.version_dir = version_dir
    load = getattr(instance, "load", None)
    if callable(load):
        load(config)
    return PythonModel(config.name, instance)


# -- a model's own modules ------------------------------------------------------------------
#
# ``model.py`` may import the modules beside it (``from helpers import f``), as Triton's
# Python backend allows. Two models may each have a ``helpers.py``, so the folder cannot
# simply join sys.path for good: the first ``helpers`` imported would be cached in
# sys.modules under that bare name and handed to every later model. Instead:
#
# - model.py runs as ``<package>.model`` in a package of its own, unique per load, whose
#   __path__ is the version folder: ``from . import helpers`` works and is isolated anyway;
# - while model.py runs and ``load()`` runs (both under one lock), the folder is first on
#   sys.path and the bare names its modules would take are cleared from sys.modules, so
#   ``import helpers`` finds this folder's file; afterwards each such module is kept as
#   ``<package>.helpers`` and the bare names get back what they held before.
#
# A module imported only later, inside ``infer``, is not found this way: import helpers at
# the top of model.py (or in ``load``).

_module_ids = itertools.count()
_import_lock = threading.Lock()  # sys.path and sys.modules are process-wide


def _package_name(model: str) -> str:
    safe = "".join(c if c.isalnum() else "_" for c in model)
    return f"conveyor_model_{safe}_{next(_module_ids)}"


def _import_model(package: str, path: Path) -> ModuleType:
    parent = ModuleType(package)
    parent.__path__ = [str(path.parent)]
    parent.__package__ = package
    sys.modules[package] = parent
    name = f"{package}.model"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # lets the model pickle its own classes
    spec.loader.exec_module(module)
    return module


def _local_names(folder: Path) -> set[str]:
    """The top-level module names that files and packages in ``folder`` would take."""
    names = {p.stem for p in folder.glob("*.py")}
    names |= {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return {name for name in names if name.isidentifier()} - {"model"}


@contextlib.contextmanager
def _own_modules(package: str, folder: Path) -> Iterator[None]:
    """While inside: ``import <module beside model.py>`` imports this folder's file."""
    with _import_lock:
        local = _local_names(folder)
        hidden = {
            name: module for name, module in sys.modules.items() if name.partition(".")[0] in local
        }
        for name in hidden:
            del sys.modules[name]
        sys.path.insert(0, str(folder))
        try:
            yield
        finally:
            sys.path.remove(str(folder))
            for name in [n for n in sys.modules if n.partition(".")[0] in local]:
                sys.modules.setdefault(f"{package}.{name}", sys.modules.pop(name))
            sys.modules.update(hidden)


def _forget(package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
