"""Conveyor: a KServe V2 inference server and in-process engine that keeps every core busy.

Everything public is importable from here; other modules are internal and may change.
"""

from conveyor.client import Client
from conveyor.engine import Engine, ModelInfo, ModelStatistics, RepositoryEntry
from conveyor.errors import (
    Cancelled,
    ConveyorError,
    DeadlineExceeded,
    ErrorKind,
    InvalidInput,
    ModelError,
    ModelNotFound,
    ModelNotReady,
    ModelUnavailable,
    QueueFull,
    RepositoryError,
    ShuttingDown,
    Unauthenticated,
    Unavailable,
    Unsupported,
)
from conveyor.futures import InferFuture, as_completed, as_completed_async
from conveyor.repository.config import ModelConfig, TensorSpec

__version__ = "0.1.0"

__all__ = [
    "Cancelled",
    "Client",
    "ConveyorError",
    "DeadlineExceeded",
    "Engine",
    "ErrorKind",
    "InferFuture",
    "InvalidInput",
    "ModelConfig",
    "ModelError",
    "ModelInfo",
    "ModelNotFound",
    "ModelNotReady",
    "ModelStatistics",
    "ModelUnavailable",
    "QueueFull",
    "RepositoryEntry",
    "RepositoryError",
    "ShuttingDown",
    "TensorSpec",
    "Unauthenticated",
    "Unavailable",
    "Unsupported",
    "__version__",
    "as_completed",
    "as_completed_async",
]
