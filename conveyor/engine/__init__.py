"""The concurrent core: usable in-process, with no server at all."""

from conveyor.engine.engine import Engine, ModelInfo, RepositoryEntry
from conveyor.engine.stats import BatchStats, Duration, ModelStatistics

__all__ = ["BatchStats", "Duration", "Engine", "ModelInfo", "ModelStatistics", "RepositoryEntry"]
