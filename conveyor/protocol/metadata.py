"""Metadata, model configuration, repository index and statistics as plain dicts.

Every function returns JSON-ready dicts in the shape the V2 protocol (and Triton's
extensions) define, so the HTTP front end serializes them as they are and the gRPC front
end copies them field by field into its messages. Nothing here knows a transport.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from conveyor.protocol.datatypes import BYTES

if TYPE_CHECKING:
    from conveyor.engine.stats import Duration, ModelStatistics
    from conveyor.repository.config import ModelConfig, TensorSpec

SERVER_NAME = "conveyor"

# The V2 / Triton extensions the HTTP front end really implements (GET /v2 lists them).
# Another front end or feature adds its own name when it lands (e.g. system_shared_memory).
EXTENSIONS: tuple[str, ...] = (
    "binary_tensor_data",
    "classification",
    "model_configuration",
    "model_repository",
    "parameters",
    "schedule_policy",
    "statistics",
)


def server_metadata(version: str, extensions: Iterable[str] = EXTENSIONS) -> dict[str, Any]:
    return {"name": SERVER_NAME, "version": version, "extensions": list(extensions)}


def _shape(spec: TensorSpec, batching: bool) -> list[int]:
    return [-1, *spec.shape] if batching else list(spec.shape)


def model_metadata(
    config: ModelConfig, platform: str, versions: Sequence[int | str]
) -> dict[str, Any]:
    """V2 model metadata; with batching on, each shape starts with -1 for the batch."""
    batching = config.max_batch_size > 0
    return {
        "name": config.name,
        "versions": [str(v) for v in versions],
        "platform": platform,
        "inputs": [
            {"name": s.name, "datatype": s.datatype, "shape": _shape(s, batching)}
            for s in config.inputs
        ],
        "outputs": [
            {"name": s.name, "datatype": s.datatype, "shape": _shape(s, batching)}
            for s in config.outputs
        ],
    }


def config_data_type(datatype: str) -> str:
    """V2 datatype -> Triton model-config data_type (BYTES is TYPE_STRING there)."""
    return "TYPE_STRING" if datatype == BYTES else f"TYPE_{datatype}"


def model_config(config: ModelConfig, platform: str, instance_count: int) -> dict[str, Any]:
    """The model's configuration as Triton's model-config JSON (what perf_analyzer reads)."""

    def tensor(spec: TensorSpec) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": spec.name,
            "data_type": config_data_type(spec.datatype),
            "dims": list(spec.shape),
        }
        if spec.optional:
            entry["optional"] = True
        if spec.label_filename is not None:
            entry["label_filename"] = spec.label_filename
        return entry

    result: dict[str, Any] = {
        "name": config.name,
        "platform": platform,
        "backend": config.backend,
        "max_batch_size": config.max_batch_size,
        "input": [tensor(s) for s in config.inputs],
        "output": [tensor(s) for s in config.outputs],
        "instance_group": [
            {"name": f"{config.name}_0", "kind": "KIND_CPU", "count": instance_count}
        ],
    }
    if config.dynamic_batching is not None:
        result["dynamic_batching"] = {
            "preferred_batch_size": list(config.dynamic_batching.preferred_batch_sizes),
            "max_queue_delay_microseconds": config.dynamic_batching.max_queue_delay_us,
        }
    if config.versions is None:
        result["version_policy"] = {"latest": {"num_versions": 1}}
    else:
        result["version_policy"] = {"specific": {"versions": list(config.versions)}}
    return result


def repository_entry(name: str, version: str, state: str, reason: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "state": state, "reason": reason}
    if version:
        entry["version"] = version
    return entry


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
