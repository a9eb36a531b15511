"""The concurrent core: usable in-process, with no server at all."""

from conveyor.engine.engine import (
    Engine,
    ModelControl,
    ModelInfo,
    ModelState,
    RepositoryEntry,
)
from conveyor.engine.stats import BatchStats, Duration, ModelStatistics

__all__ = [
    "BatchStats",
    "Duration",
    "Engine",
    "ModelControl",
    "ModelInfo",
    "ModelState",
    "ModelStatistics",
    "RepositoryEntry",
]
