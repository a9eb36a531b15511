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


def _openvino() -> Backend:
    from conveyor.backends.openvino import OpenVinoBackend

    return OpenVinoBackend()


register_backend("onnxruntime", _onnxruntime, "model.onnx", platform="onnxruntime_onnx")
register_backend("python", _python, "model.py", process_instances=True)
# IR (model.xml + model.bin) is found by itself; model.onnx only with backend = "openvino",
# since an ONNX file alone means onnxruntime.
register_backend(
    "openvino", _openvino, "model.xml", platform="openvino", other_filenames=("model.onnx",)
)

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
