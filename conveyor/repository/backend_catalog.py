"""The backend catalog: each backend's facts, which the repository reads to parse configs.

A backend's name (``backend = "<name>"`` in config.toml, and its options table ``[<name>]``),
its model file, the platform V2 metadata reports for its models, and whether its models may
run as worker processes. The built-in backends are listed here by the import path of their
class, so reading the catalog imports no backend code: the repository sits below the
backends, and :func:`conveyor.backends.get_backend` imports a backend when a model needs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conveyor.errors import RepositoryError


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    name: str
    # Returns a conveyor.backends.base.Backend, or names one as "package.module:Class";
    # typed loosely so this module imports no backend code.
    factory: Callable[[], Any] | str
    filename: str  # its model file in a version folder, e.g. model.onnx
    platform: str  # the model metadata's "platform" (Triton's name for it)
    process_instances: bool  # whether instance_kind = "process" may run its models
    # Other model files it loads when the config names it (openvino also loads model.onnx);
    # never used to guess a backend.
    other_filenames: tuple[str, ...] = ()


_BACKENDS: dict[str, BackendInfo] = {}


def register_backend(
    name: str,
    factory: Callable[[], Any] | str,
    filename: str,
    *,
    platform: str | None = None,
    process_instances: bool = False,
    other_filenames: tuple[str, ...] = (),
) -> None:
    """Make ``backend = "<name>"`` use ``factory()``; ``filename`` is its model file's name.

    ``factory`` is a callable returning the backend, or ``"package.module:Class"``, imported
    when a model first needs it.

    ``platform`` defaults to ``name``. ``process_instances``: its loaded models can be forked
    into worker processes (instance_kind = "process"). ``other_filenames``: files it also
    loads when a config names the backend.
    """
    _BACKENDS[name] = BackendInfo(
        name,
        factory,
        filename,
        platform or name,
        process_instances=process_instances,
        other_filenames=other_filenames,
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


def platform(name: str) -> str:
    """What V2 model metadata reports as the platform of a ``name`` backend's model."""
    info = _BACKENDS.get(name)
    return info.platform if info is not None else name


def model_filenames() -> dict[str, str]:
    """Every registered backend's model file name, by backend name."""
    return {info.name: info.filename for info in _BACKENDS.values()}


def other_model_filenames(name: str) -> tuple[str, ...]:
    """The other model files a ``name`` backend loads when a config names it."""
    info = _BACKENDS.get(name)
    return info.other_filenames if info is not None else ()


def infer_backend(version_dir: Path) -> str | None:
    """The backend whose model file is present in ``version_dir``, when the config names none."""
    for info in _BACKENDS.values():
        if (version_dir / info.filename).exists():
            return info.name
    return None


register_backend(
    "onnxruntime",
    "conveyor.backends.onnxruntime:OnnxRuntimeBackend",
    "model.onnx",
    platform="onnxruntime_onnx",
)
register_backend(
    "python", "conveyor.backends.python:PythonBackend", "model.py", process_instances=True
)
# IR (model.xml + model.bin) is found by itself; model.onnx only with backend = "openvino",
# since an ONNX file alone means onnxruntime.
register_backend(
    "openvino",
    "conveyor.backends.openvino:OpenVinoBackend",
    "model.xml",
    platform="openvino",
    other_filenames=("model.onnx",),
)
