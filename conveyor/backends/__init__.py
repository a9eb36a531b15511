"""Backends by name. More can be registered without touching the engine.

The registry is the one place that knows each backend's facts: its name (``backend =
"<name>"`` in config.toml, and its options table ``[<name>]``), its model file, the platform
V2 metadata reports for its models, and whether its models may run as worker processes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from conveyor.backends.base import Backend, LoadedModel
from conveyor.errors import RepositoryError


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    name: str
    factory: Callable[[], Backend]
    filename: str  # its model file in a version folder, e.g. model.onnx
    platform: str  # the model metadata's "platform" (Triton's name for it)
    process_instances: bool  # whether instance_kind = "process" may run its models


_BACKENDS: dict[str, BackendInfo] = {}


def register_backend(
    name: str,
    factory: Callable[[], Backend],
    filename: str,
    *,
    platform: str | None = None,
    process_instances: bool = False,
) -> None:
    """Make ``backend = "<name>"`` use ``factory()``; ``filename`` is its model file's name.

    ``platform`` defaults to ``name``. ``process_instances``: its loaded models can be forked
    into worker processes (instance_kind = "process").
    """
    _BACKENDS[name] = BackendInfo(
        name, factory, filename, platform or name, process_instances=process_instances
    )


def backend_info(name: str) -> BackendInfo:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise RepositoryError(
            f"unknown backend {name!r}; known backends are {', '.join(backend_names())}"
        ) from None


def backend_names() -> tuple[str, ...]:
    return tuple(sorted(_BACKENDS))


def get_backend(name: str) -> Backend:
    return backend_info(name).factory()


def platform(name: str) -> str:
    """What V2 model metadata reports as the platform of a ``name`` backend's model."""
    info = _BACKENDS.get(name)
    return info.platform if info is not None else name


def model_filenames() -> dict[str, str]:
    """Every registered backend's model file name, by backend name."""
    return {info.name: info.filename for info in _BACKENDS.values()}


def infer_backend(version_dir: Path) -> str | None:
    """The backend whose model file is present in ``version_dir``, when the config names none."""
    for info in _BACKENDS.values():
        if (version_dir / info.filename).exists():
            return info.name
    return None


def _onnxruntime() -> Backend:
    from conveyor.backends.onnxruntime import OnnxRuntimeBackend

    return OnnxRuntimeBackend()


def _python() -> Backend:
    from conveyor.backends.python import PythonBackend

    return PythonBackend()


register_backend("onnxruntime", _onnxruntime, "model.onnx", platform="onnxruntime_onnx")
register_backend("python", _python, "model.py", process_instances=True)

__all__ = [
    "Backend",
    "BackendInfo",
    "LoadedModel",
    "backend_info",
    "backend_names",
    "get_backend",
    "infer_backend",
    "model_filenames",
    "platform",
    "register_backend",
]
