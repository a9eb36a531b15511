"""Backends by name. More can be registered without touching the engine.

The facts about each backend (name, model file, platform) live in the repository's
:mod:`conveyor.repository.backend_catalog`, which lists the built-in ones; this package turns
a name into a backend.
"""

from __future__ import annotations

import importlib
from typing import cast

from conveyor.backends.base import Backend, LoadedModel
from conveyor.repository.backend_catalog import (
    BackendInfo,
    backend_info,
    backend_names,
    infer_backend,
    model_filenames,
    platform,
    register_backend,
)


def get_backend(name: str) -> Backend:
    factory = backend_info(name).factory
    if isinstance(factory, str):
        module, _, attribute = factory.partition(":")
        factory = getattr(importlib.import_module(module), attribute)
    return cast(Backend, factory())


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
