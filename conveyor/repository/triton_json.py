"""A model's configuration and metadata as Triton's JSON (what its clients and tools read).

``model_config`` is Triton's model-config JSON (what perf_analyzer and a Triton Python
model's ``args["model_config"]`` read); ``model_metadata`` is V2 model metadata. The HTTP
front end serializes them as they are; the gRPC front end copies them into its messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conveyor.protocol.datatypes import BYTES
from conveyor.repository.config import ModelConfig, TensorSpec, WarmupSample
from conveyor.repository.sequences import SequenceBatching


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
    """The model's configuration as Triton's model-config JSON (what perf_analyzer reads).

    It is the completed config: inputs and outputs filled in from the model file when the
    config listed none, whether it came from config.toml or config.pbtxt.
    """

    def tensor(spec: TensorSpec) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": spec.name,
            "data_type": config_data_type(spec.datatype),
            "dims": list(spec.shape),
        }
        if spec.optional:
            entry["optional"] = True
        if spec.allow_ragged_batch:
            entry["allow_ragged_batch"] = True
        if spec.format is not None:
            entry["format"] = spec.format
        if spec.reshape is not None:
            entry["reshape"] = {"shape": list(spec.reshape)}
        if spec.label_filename is not None:
            entry["label_filename"] = spec.label_filename
        return entry

    groups = [
        {"name": g.name, "kind": g.kind, "count": g.count} for g in config.instance_groups
    ] or [{"name": f"{config.name}_0", "kind": "KIND_CPU", "count": instance_count}]
    result: dict[str, Any] = {
        "name": config.name,
        "platform": platform,
        "backend": config.backend,
        "max_batch_size": config.max_batch_size,
        "input": [tensor(s) for s in config.inputs],
        "output": [tensor(s) for s in config.outputs],
        "instance_group": groups,
    }
    batching = config.dynamic_batching
    if batching is not None:
        result["dynamic_batching"] = {
            "preferred_batch_size": list(batching.preferred_batch_sizes),
            "max_queue_delay_microseconds": batching.max_queue_delay_us,
            "priority_levels": batching.priority_levels,
            "default_priority_level": batching.default_priority_level,
            "default_queue_policy": {
                "timeout_action": "REJECT",
                "default_timeout_microseconds": round((config.default_timeout_s or 0) * 1e6),
                "allow_timeout_override": config.allow_timeout_override,
                "max_queue_size": config.max_queue_size,
            },
        }
    if config.decoupled:
        result["model_transaction_policy"] = {"decoupled": True}
    if config.sequence_batching is not None:
        result["sequence_batching"] = sequence_batching_json(config.sequence_batching)
    if config.versions is not None:
        result["version_policy"] = {"specific": {"versions": list(config.versions)}}
    elif config.latest_versions is None:
        result["version_policy"] = {"all": {}}
    else:
        result["version_policy"] = {"latest": {"num_versions": config.latest_versions}}
    if config.model_filename is not None:
        result["default_model_filename"] = config.model_filename
    parameters = {**config.ignored_parameters, **config.backend_options}
    if parameters:
        result["parameters"] = {
            key: {"string_value": str(value)} for key, value in parameters.items()
        }
    if config.warmup:
        result["model_warmup"] = [_warmup(sample) for sample in config.warmup]
    if config.ensemble_steps:
        # Triton's shape; an ensemble runs no instances of its own, so it lists no group.
        del result["instance_group"]
        result["ensemble_scheduling"] = {
            "step": [
                {
                    "model_name": step.model,
                    "model_version": -1 if step.version is None else step.version,
                    "input_map": dict(step.input_map),
                    "output_map": dict(step.output_map),
                }
                for step in config.ensemble_steps
            ]
        }
    return result


def _warmup(sample: WarmupSample) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    for spec in sample.inputs:
        entry: dict[str, Any] = {
            "data_type": config_data_type(spec.datatype),
            "dims": list(spec.shape),
        }
        if spec.data == "file" and spec.file is not None:
            entry["input_data_file"] = spec.file.name
        else:
            entry[f"{spec.data}_data"] = True
        inputs[spec.name] = entry
    return {
        "name": sample.name,
        "batch_size": sample.batch_size,
        "inputs": inputs,
        "count": sample.count,
    }


def sequence_batching_json(batching: SequenceBatching) -> dict[str, Any]:
    """``sequence_batching`` as Triton's model config JSON writes it (control inputs with
    their kinds and false/true values or data type), so a model that reads its own config
    in ``initialize`` finds its control tensors."""
    controls = []
    for control in batching.controls:
        entry: dict[str, Any] = {"kind": f"CONTROL_SEQUENCE_{control.kind.upper()}"}
        if control.kind == "corrid":
            datatype = "STRING" if control.datatype == "BYTES" else control.datatype
            entry["data_type"] = f"TYPE_{datatype}"
        else:
            key = {"INT32": "int32", "FP32": "fp32", "BOOL": "bool"}[control.datatype]
            convert = {"int32": int, "fp32": float, "bool": bool}[key]
            entry[f"{key}_false_true"] = [
                convert(control.false_value),
                convert(control.true_value),
            ]
        controls.append({"name": control.name, "control": [entry]})
    result: dict[str, Any] = {
        "max_sequence_idle_microseconds": batching.max_sequence_idle_us,
        "control_input": controls,
        "direct": {},
    }
    if batching.oldest is not None:
        del result["direct"]
        result["oldest"] = {
            "max_candidate_sequences": batching.oldest.max_candidate_sequences,
            "preferred_batch_size": list(batching.oldest.preferred_batch_sizes),
            "max_queue_delay_microseconds": batching.oldest.max_queue_delay_us,
        }
    if batching.iterative:
        result["iterative_sequence"] = True
    return result
