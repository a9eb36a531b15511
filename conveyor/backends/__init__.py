"""Backends by name. More can be registered without touching the engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conveyor.backends.base import Backend, LoadedModel
from conveyor.errors import RepositoryError

_FACTORIES: dict[str, Callable[[], Backend]] = {}
_FILENAMES: dict[str, str] = {}


def register_backend(name: str, factory: Callable[[], Backend], filename: str) -> None:
    """Make ``backend = "<name>"`` use ``factory()``; ``filename`` is its model file's name."""
    _FACTORIES[name] = factory
    _FILENAMES[name] = filename


def get_backend(name: str) -> Backend:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise RepositoryError(
            f"unknown backend {name!r}; known backends are {', '.join(sorted(_FACTORIES))}"
        ) from None
    return factory()


def model_filename(name: str) -> str:
    return _FILENAMES[name]


def model_filenames() -> dict[str, str]:
    """Every registered backend's model file name, by backend name."""
    return dict(_FILENAMES)


def infer_backend(version_dir: Path) -> str | None:
    """The backend whose model file is present in ``version_dir``, when the config names none."""
    for name, filename in _FILENAMES.items():
        if (version_dir / filename).exists():
            return name
    return None


def _onnxruntime() -> Backend:
    from conveyor.backends.onnxruntime import OnnxRuntimeBackend

    return OnnxRuntimeBackend()


def _python() -> Backend:
    from conveyor.backends.python import PythonBackend

    return PythonBackend()


register_backend("onnxruntime", _onnxruntime, "model.onnx")
register_backend("python", _python, "model.py")

__all__ = [
    "Backend",
    "LoadedModel",
    "get_backend",
    "infer_backend",
    "model_filename",
    "model_filenames",
    "register_backend",
]
