"""The engine's statistics as Triton's statistics-extension JSON (GET .../stats)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from conveyor.engine.stats import Duration, ModelStatistics


def _duration(value: Duration) -> dict[str, int]:
    return {"count": value.count, "ns": value.ns}


_ZERO = {"count": 0, "ns": 0}


def model_statistics(stats: ModelStatistics) -> dict[str, Any]:
    """One model version's statistics in Triton's statistics-extension JSON."""
    return {
        "name": stats.name,
        "version": str(stats.version),
        "last_inference": stats.last_inference_ms,
        "inference_count": stats.inference_count,
        "execution_count": stats.execution_count,
        "inference_stats": {
            "success": _duration(stats.success),
            "fail": _duration(stats.fail),
            "queue": _duration(stats.queue),
            "compute_input": _duration(stats.compute_input),
            "compute_infer": _duration(stats.compute_infer),
            "compute_output": _duration(stats.compute_output),
            # No response cache: always zero, present because clients read them.
            "cache_hit": dict(_ZERO),
            "cache_miss": dict(_ZERO),
        },
        "batch_stats": [
            {
                "batch_size": batch.batch_size,
                "compute_input": _duration(batch.compute_input),
                "compute_infer": _duration(batch.compute_infer),
                "compute_output": _duration(batch.compute_output),
            }
            for batch in stats.batch_stats
        ],
    }


def statistics(all_stats: Iterable[ModelStatistics]) -> dict[str, Any]:
    return {"model_stats": [model_statistics(s) for s in all_stats]}
