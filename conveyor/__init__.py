"""Conveyor: a KServe V2 inference server and in-process engine that keeps every core busy.

Everything public is importable from here; other modules are internal and may change.
"""

from typing import Any

from conveyor.client import Client
from conveyor.engine import (
    Engine,
    ModelControl,
    ModelInfo,
    ModelState,
    ModelStatistics,
    RepositoryEntry,
)
from conveyor.errors import (
    AlreadyExists,
    Cancelled,
    ConveyorError,
    DeadlineExceeded,
    ErrorKind,
    InvalidInput,
    ModelError,
    ModelNotFound,
    ModelNotReady,
    ModelUnavailable,
    ModelUnsupported,
    QueueFull,
    RepositoryError,
    ShuttingDown,
    Unauthenticated,
    Unavailable,
    UnknownError,
    Unsupported,
)
from conveyor.futures import InferFuture, as_completed, as_completed_async
from conveyor.protocol.request import InferenceRequest, SequenceInfo
from conveyor.repository.config import InstanceKind, ModelConfig, TensorSpec

__all__ = [
    "AlreadyExists",
    "Cancelled",
    "Client",
    "ConveyorError",
    "DeadlineExceeded",
    "Engine",
    "ErrorKind",
    "InferFuture",
    "InferenceRequest",
    "InstanceKind",
    "InvalidInput",
    "ModelConfig",
    "ModelControl",
    "ModelError",
    "ModelInfo",
    "ModelNotFound",
    "ModelNotReady",
    "ModelState",
    "ModelStatistics",
    "ModelUnavailable",
    "ModelUnsupported",
    "QueueFull",
    "RepositoryEntry",
    "RepositoryError",
    "SequenceInfo",
    "ShuttingDown",
    "TensorSpec",
    "Unauthenticated",
    "Unavailable",
    "UnknownError",
    "Unsupported",
    "__version__",
    "as_completed",
    "as_completed_async",
]


def __getattr__(name: str) -> Any:
    # ``__version__`` on first use: reading the package metadata costs an import of its own.
    if name == "__version__":
        from conveyor._version import package_version

        globals()["__version__"] = version = package_version()
        return version
    raise AttributeError(f"module 'conveyor' has no attribute {name!r}")
