"""Backends by name. More can be registered without touching the engine.

The facts about each backend live in :mod:`conveyor.backends.registry`; this package
registers the built-in ones and turns a name into a backend.
"""

from __future__ import annotations

from typing import cast

from conveyor.backends.base import Backend, LoadedModel
from conveyor.backends.registry import (
    BackendInfo,
    backend_info,
    backend_names,
    infer_backend,
    model_filenames,
    platform,
    register_backend,
)


def get_backend(name: str) -> Backend:
    return cast(Backend, backend_info(name).factory())


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
