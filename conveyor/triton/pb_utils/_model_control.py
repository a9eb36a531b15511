"""Model control from a model's own code (``load_model``, ``unload_model``,
``is_model_ready``), through the engine that serves the model, as Triton's BLS model
loading goes through its server.

Loading and unloading need the server's explicit model control (``--model-control
explicit``), as in Triton; otherwise they raise ``TritonModelException`` with the server's
refusal (Triton's words first). So does a model Triton would not find, for
``is_model_ready`` too: ``Request for unknown model: 'x' ...``.
"""

from __future__ import annotations

from typing import Any

from conveyor.errors import ConveyorError
from conveyor.triton.pb_utils._errors import TritonModelException, unsupported
from conveyor.triton.pb_utils._requests import _reachable


def _engine(what: str) -> Any:
    """The engine whose models the running model reaches (its caller is ``Engine.submit``)."""
    engine = getattr(_reachable(f"pb_utils.{what}"), "__self__", None)
    if engine is None or not hasattr(engine, "load_model"):
        raise unsupported(
            f"pb_utils.{what} from a process instance",
            'run the model on thread instances (instance_kind "thread")',
        )
    return engine


def _checked_name(what: str, value: object) -> str:
    # Triton's arguments are typed (pybind11): one of another type is a TypeError.
    if not isinstance(value, str):
        raise TypeError(f"{what}: expected str, got {type(value).__name__} {value!r}")
    return value


def load_model(model_name: str, config: str = "", files: Any = None) -> None:
    """Load (or reload) ``model_name``; ``config`` (JSON) and ``files`` (path -> bytes)
    replace the repository's for this load, as the load request's parameters do."""
    name = _checked_name("model_name", model_name)
    _checked_name("config", config)
    if files is not None and not isinstance(files, dict):
        raise TritonModelException(  # Triton's words
            f"failed to load model '{name}', files should be a dictionary of file paths and "
            "file contents"
        )
    contents = None
    if files:
        contents = {}
        for path, content in files.items():
            if not isinstance(content, bytes):
                raise TypeError(f"files[{path!r}]: expected bytes, got {type(content).__name__}")
            contents[str(path)] = content
    try:
        _engine("load_model").load_model(name, config or None, contents)
    except ConveyorError as exc:
        raise TritonModelException(exc.message) from None


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload ``model_name`` once the requests it holds are answered. Conveyor loads an
    ensemble's step models with it but unloads each on its own: ``unload_dependents``
    unloads only the model named."""
    name = _checked_name("model_name", model_name)
    if not isinstance(unload_dependents, bool):
        raise TypeError(f"unload_dependents: expected bool, got {type(unload_dependents).__name__}")
    try:
        _engine("unload_model").unload_model(name)
    except ConveyorError as exc:
        raise TritonModelException(exc.message) from None


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether ``model_name`` (``model_version``, or its latest) serves; a model or version
    the server does not hold raises, as Triton's (``Request for unknown model: ...``)."""
    name = _checked_name("model_name", model_name)
    version = _checked_name("model_version", model_version)
    try:
        return bool(_engine("is_model_ready").model(name, version or None).ready)
    except ConveyorError as exc:
        raise TritonModelException(exc.message) from None
