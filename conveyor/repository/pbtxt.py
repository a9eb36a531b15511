"""Triton's ``config.pbtxt`` read into the same ModelConfig that ``config.toml`` gives.

The file is parsed with protobuf's text format against Triton's own ``inference.ModelConfig``
(proto/model_config.proto declares every field Triton does), so anything Triton would parse
parses here, and a typo is a parse error with its line and column. Each field then falls in
one of three groups, listed in docs/triton-migration.md:

- honoured: mapped onto ModelConfig (through the same validation as config.toml);
- warned: accepted, one warning says it has no effect here (e.g. optimization: onnxruntime's
  own graph optimizations still run, the model's answers are the same);
- refused: a load error, for fields whose meaning Conveyor would silently change (a
  sequence-batched model answered as a stateless one would give wrong answers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format
from google.protobuf.message import Message

from conveyor.errors import RepositoryError
from conveyor.protocol.grpc._generated import model_config_pb2 as pb
from conveyor.repository import onnxruntime_options, openvino_options
from conveyor.repository.config import (
    DEFAULT_MAX_QUEUE_SIZE,
    InstanceGroup,
    ModelConfig,
    WarmupInput,
    WarmupSample,
    parse_config,
)
from conveyor.repository.ensemble import ENSEMBLE
from conveyor.repository.openai_spec import PBTXT_PREFIX as OPENAI_PREFIX
from conveyor.repository.openai_spec import pbtxt_openai_table
from conveyor.repository.openvino_options import triton_parameters
from conveyor.repository.pbtxt_sequences import read_sequence_batching
from conveyor.repository.ray_scaling import (
    PBTXT_PREFIX,
    parse_ray_scaling,
    pbtxt_key,
    pbtxt_ray_table,
)

PBTXT_FILE = "config.pbtxt"
OVERRIDE_SOURCE = "the load request's config"

# platform or backend in config.pbtxt -> Conveyor's backend name.
_PLATFORMS = {"onnxruntime_onnx": "onnxruntime", ENSEMBLE: ENSEMBLE}
_BACKENDS = {"onnxruntime": "onnxruntime", "python": "python", "openvino": "openvino"}

# Top-level fields with no effect here, and fields that would change what the model answers.
_WARNED = {
    "optimization",
    "response_cache",
    "runtime",
    "cc_model_filenames",
    "metric_tags",
    "model_operations",
    "model_metrics",
}
_REFUSED = {
    "batch_input": "Conveyor does not make batch inputs (the model would miss a tensor)",
    "batch_output": "Conveyor does not split batch outputs",
    "model_repository_agents": "Conveyor runs no repository agents (the files would be used "
    "as they are)",
}
# parameters { key: "instance_kind" value: { string_value: "process" } } on a python model
INSTANCE_KIND_PARAMETER = "instance_kind"

# The parameters each backend reads (after the renames below); Triton's parameters map is
# free-form, so a key the backend does not read is accepted with a warning, as Triton's
# backends ignore keys they do not know. A Python model reads them all itself.
_BACKEND_KEYS = {
    "onnxruntime": onnxruntime_options.OPTION_KEYS,
    "openvino": openvino_options.OPTION_KEYS,
}

# Triton's onnxruntime backend parameter names -> Conveyor's [onnxruntime] keys.
_ORT_PARAMETERS = {
    "intra_op_thread_count": "intra_op_threads",
    "inter_op_thread_count": "inter_op_threads",
}


def _conveyors(key: str) -> bool:
    """A parameter Conveyor reads itself (ray.*, openai.*), never passed to the backend."""
    return key.startswith((PBTXT_PREFIX, OPENAI_PREFIX))


@dataclasses.dataclass(frozen=True)
class PbtxtConfig:
    config: ModelConfig
    warnings: tuple[str, ...]


def read_pbtxt(
    path: Path,
    name: str,
    *,
    backend: str | None,
    no_backend: Callable[[], RepositoryError],
    gpu_on_cpu: bool = False,
) -> PbtxtConfig:
    """Parse ``<model>/config.pbtxt``; RepositoryError names the model, file and field.

    ``backend``: the one whose model file the version folders hold, for a config that names
    neither platform nor backend; ``no_backend()`` is raised when there is none either.
    """
    message = pb.ModelConfig()
    try:
        text_format.Parse(path.read_text(encoding="utf-8"), message)
    except text_format.ParseError as exc:
        # str(exc) starts with "line:column : "; say it in words instead.
        reason = str(exc).split(" : ", 1)[-1]
        raise RepositoryError(
            f"model {name!r}: {name}/{PBTXT_FILE} line {exc.GetLine()} column "
            f"{exc.GetColumn()}: {reason}"
        ) from None
    except UnicodeDecodeError as exc:
        raise RepositoryError(f"model {name!r}: {name}/{PBTXT_FILE} is not UTF-8: {exc}") from None
    reader = _Reader(name, path.parent, gpu_on_cpu)
    return reader.read(message, backend, no_backend)


def read_json_config(
    text: str,
    name: str,
    folder: Path,
    *,
    backend: str | None,
    no_backend: Callable[[], RepositoryError],
    gpu_on_cpu: bool = False,
) -> PbtxtConfig:
    """A model configuration given as JSON (Triton's ``ModelConfig`` in its JSON form, as a
    load request's ``config`` parameter carries it), read as ``config.pbtxt`` would be.

    ``folder``: the model's folder (label files are read from it).
    """
    message = pb.ModelConfig()
    try:
        json_format.Parse(text, message)
    except json_format.ParseError as exc:
        raise RepositoryError(
            f"model {name!r}: {OVERRIDE_SOURCE} is not a model configuration in Triton's JSON "
            f"form: {exc}"
        ) from None
    reader = _Reader(name, folder, gpu_on_cpu, source=OVERRIDE_SOURCE)
    return reader.read(message, backend, no_backend)


def _set_fields(message: Message) -> list[str]:
    return [field.name for field, _ in message.ListFields()]


class _Reader:
    """``source``: where the config came from, as errors and warnings name it."""

    def __init__(self, name: str, folder: Path, gpu_on_cpu: bool, source: str = PBTXT_FILE) -> None:
        self.name = name
        self.folder = folder
        self.gpu_on_cpu = gpu_on_cpu
        self.source = source
        self.warnings: list[str] = []
        self.ignored: dict[str, str] = {}  # parameters the backend does not read

    def fail(self, field: str, message: str) -> RepositoryError:
        return RepositoryError(f"model {self.name!r}: {self.source} {field}: {message}")

    def warn(self, field: str) -> None:
        self.warnings.append(
            f"model {self.name!r}: {self.source} field {field} has no effect in Conveyor "
            "(accepted and ignored)"
        )

    def sort_fields(
        self, message: Message, where: str, warned: set[str], refused: dict[str, str]
    ) -> None:
        for field in _set_fields(message):
            full = f"{where}.{field}" if where else field
            if field in refused:
                raise self.fail(full, f"not supported: {refused[field]}")
            if field in warned:
                self.warn(full)

    def read(
        self, m: pb.ModelConfig, inferred: str | None, no_backend: Callable[[], RepositoryError]
    ) -> PbtxtConfig:
        self.sort_fields(m, "", _WARNED, _REFUSED)
        if m.name and m.name != self.name:
            raise self.fail("name", f"{m.name!r} does not match the model's folder {self.name!r}")
        backend = self.backend(m) or inferred
        if backend is None:
            raise no_backend()
        if m.max_batch_size < 0:
            raise self.fail("max_batch_size", f"must be >= 0, got {m.max_batch_size}")
        raw: dict[str, Any] = {"max_batch_size": m.max_batch_size, "backend": backend}
        if m.model_transaction_policy.decoupled:
            raw["decoupled"] = True
        # ray.* parameters are Conveyor's Ray Serve settings, not the backend's.
        ray = pbtxt_ray_table({key: p.string_value for key, p in m.parameters.items()})
        if ray:
            # Checked here so an error names the parameter as the user wrote it.
            parse_ray_scaling(ray, lambda message: self.fail("parameters", message), pbtxt_key)
            raw["ray"] = ray
        # openai.* parameters declare the OpenAI embeddings door (config.toml's [openai]).
        openai = pbtxt_openai_table({key: p.string_value for key, p in m.parameters.items()})
        if openai:
            raw["openai"] = openai
        if backend != ENSEMBLE:  # an ensemble runs no backend of its own to pass them to
            raw[backend] = self.parameters(m, backend)
            if backend == "python" and INSTANCE_KIND_PARAMETER in raw[backend]:
                # Triton runs every Python instance as a process of its own; Conveyor runs
                # threads unless the config asks for processes with this parameter.
                raw["instance_kind"] = raw[backend].pop(INSTANCE_KIND_PARAMETER)
        elif any(not _conveyors(key) for key in m.parameters):
            self.warn("parameters")
        raw["inputs"] = [self.tensor(t, f"input[{i}]") for i, t in enumerate(m.input)]
        raw["outputs"] = [self.tensor(t, f"output[{i}]") for i, t in enumerate(m.output)]
        if backend == ENSEMBLE or m.HasField("ensemble_scheduling"):
            raw["steps"] = self.ensemble_steps(m, backend)
        groups, instances = self.instance_groups(m)
        if instances is not None:
            raw["instances"] = instances
        extra: dict[str, Any] = {"instance_groups": groups}
        if m.HasField("dynamic_batching"):
            raw["dynamic_batching"], batching_extra = self.dynamic_batching(m)
            extra.update(batching_extra)
            raw["max_queue_size"] = extra.pop("max_queue_size")
        extra.update(self.version_policy(m, raw))
        if m.default_model_filename:
            if "/" in m.default_model_filename or m.default_model_filename in (".", ".."):
                raise self.fail("default_model_filename", "must be a file name, not a path")
            extra["model_filename"] = m.default_model_filename
        config = parse_config(self.name, raw)
        extra["ignored_parameters"] = self.ignored
        levels, default = extra.pop("priority", (0, 0))
        config = dataclasses.replace(config, **extra)
        if config.dynamic_batching is not None:
            batching = dataclasses.replace(
                config.dynamic_batching, priority_levels=levels, default_priority_level=default
            )
            config = dataclasses.replace(config, dynamic_batching=batching)
        if m.HasField("sequence_batching"):
            sequences = read_sequence_batching(m.sequence_batching, self.fail, m.max_batch_size)
            config = dataclasses.replace(config, sequence_batching=sequences)
        config = self.tensor_extras(m, config)
        config = dataclasses.replace(config, warmup=self.warmup(m, config))
        return PbtxtConfig(config, tuple(self.warnings))

    def backend(self, m: pb.ModelConfig) -> str | None:
        for field, value, known in (
            ("platform", m.platform, _PLATFORMS),
            ("backend", m.backend, _BACKENDS),
        ):
            if value and value not in known:
                choices = ", ".join(repr(k) for k in known)
                raise self.fail(field, f"{value!r} is not supported; Conveyor serves {choices}")
        by_platform = _PLATFORMS.get(m.platform)
        by_backend = _BACKENDS.get(m.backend)
        if by_platform and by_backend and by_platform != by_backend:
            raise self.fail("backend", f"{m.backend!r} does not run platform {m.platform!r} models")
        return by_backend or by_platform

    def ensemble_steps(self, m: pb.ModelConfig, backend: str) -> list[dict[str, Any]]:
        """ensemble_scheduling's steps in config.toml's [[steps]] shape (checked there)."""
        if backend != ENSEMBLE:
            raise self.fail("ensemble_scheduling", f'needs platform: "{ENSEMBLE}"')
        if not m.ensemble_scheduling.step:
            raise self.fail(
                "ensemble_scheduling",
                'lists no step (platform "ensemble" needs ensemble_scheduling { step [...] })',
            )
        scheduling = m.ensemble_scheduling
        self.sort_fields(scheduling, "ensemble_scheduling", {"max_inflight_requests"}, {})
        steps = []
        for i, step in enumerate(m.ensemble_scheduling.step):
            self.sort_fields(step, f"ensemble_scheduling.step[{i}]", {"model_namespace"}, {})
            steps.append(
                {
                    "model": step.model_name,
                    "version": step.model_version,
                    "input_map": dict(step.input_map),
                    "output_map": dict(step.output_map),
                }
            )
        return steps

    def parameters(self, m: pb.ModelConfig, backend: str) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if backend == "openvino":
            strings = {
                key: p.string_value for key, p in m.parameters.items() if not _conveyors(key)
            }
            try:
                return self.known_parameters(triton_parameters(strings), backend)
            except ValueError as exc:
                key, reason = exc.args
                raise self.fail(f"parameters[{key!r}]", reason) from None
        for key, parameter in m.parameters.items():
            if _conveyors(key):
                continue
            value: Any = parameter.string_value
            if backend == "onnxruntime":
                # Conveyor's onnxruntime options are typed; Triton's are all strings.
                key = _ORT_PARAMETERS.get(key, key)
                if value.lstrip("-").isdigit():
                    value = int(value)
            options[key] = value
        return self.known_parameters(options, backend)

    def known_parameters(self, options: dict[str, Any], backend: str) -> dict[str, Any]:
        """The options the backend reads; every other key is named in one warning each."""
        known = _BACKEND_KEYS.get(backend)
        if known is None:
            return options
        for key in sorted(set(options) - known):
            self.ignored[key] = str(options.pop(key))
            self.warnings.append(
                f"model {self.name!r}: {self.source} parameters key {key!r} is not read by the "
                f"{backend} backend (accepted and ignored; it reads {', '.join(sorted(known))})"
            )
        return options

    def tensor(self, t: pb.ModelInput | pb.ModelOutput, where: str) -> dict[str, Any]:
        self.sort_fields(
            t,
            where,
            {"is_non_linear_format_io"},
            {
                "is_shape_tensor": "Conveyor has no shape tensors",
            },
        )
        if not t.name:
            raise self.fail(f"{where}.name", "every input and output needs a name")
        entry: dict[str, Any] = {
            "name": t.name,
            "datatype": self.datatype(t.data_type, f"{where}.data_type ({t.name})"),
            "shape": self.dims(list(t.dims), f"{where}.dims ({t.name})"),
        }
        if isinstance(t, pb.ModelInput) and t.optional:
            entry["optional"] = True
        if isinstance(t, pb.ModelInput) and t.allow_ragged_batch:
            entry["allow_ragged_batch"] = True
        return entry

    def datatype(self, value: int, where: str) -> str:
        if value == pb.TYPE_INVALID:
            raise self.fail(where, "missing (e.g. data_type: TYPE_FP32)")
        name = pb.DataType.Name(value)
        return "BYTES" if name == "TYPE_STRING" else name.removeprefix("TYPE_")

    def dims(self, dims: list[int], where: str) -> list[int]:
        bad = [d for d in dims if d < -1]
        if bad:
            raise self.fail(where, f"dimensions are >= 0 or -1 (any size), got {bad[0]}")
        return dims

    def tensor_extras(self, m: pb.ModelConfig, config: ModelConfig) -> ModelConfig:
        """reshape, format and label_filename, which config.toml has no keys for."""
        inputs = []
        for i, (t, spec) in enumerate(zip(m.input, config.inputs, strict=True)):
            fmt = pb.ModelInput.Format.Name(t.format) if t.format else None
            reshape = self.reshape(t, f"input[{i}]")
            inputs.append(dataclasses.replace(spec, format=fmt, reshape=reshape))
        outputs = []
        for i, (o, spec) in enumerate(zip(m.output, config.outputs, strict=True)):
            label = None
            if o.label_filename:
                if not (self.folder / o.label_filename).is_file():
                    raise self.fail(
                        f"output[{i}].label_filename ({o.name})",
                        f"{self.name}/{o.label_filename} does not exist",
                    )
                label = o.label_filename
            reshape = self.reshape(o, f"output[{i}]")
            outputs.append(dataclasses.replace(spec, label_filename=label, reshape=reshape))
        return dataclasses.replace(config, inputs=tuple(inputs), outputs=tuple(outputs))

    def reshape(self, t: pb.ModelInput | pb.ModelOutput, where: str) -> tuple[int, ...] | None:
        if not t.HasField("reshape"):
            return None
        shape = self.dims(list(t.reshape.shape), f"{where}.reshape ({t.name})")
        if shape.count(-1) > 1:
            raise self.fail(f"{where}.reshape ({t.name})", f"{shape} has more than one -1")
        return tuple(shape)

    def instance_groups(self, m: pb.ModelConfig) -> tuple[tuple[InstanceGroup, ...], int | None]:
        groups = []
        kinds = pb.ModelInstanceGroup.Kind
        for i, group in enumerate(m.instance_group):
            where = f"instance_group[{i}]"
            self.sort_fields(
                group,
                where,
                {"rate_limiter", "secondary_devices", "profile", "passive", "host_policy"},
                {},
            )
            if group.count < 0:
                raise self.fail(f"{where}.count", f"must be >= 1, got {group.count}")
            count = group.count or 1  # Triton's default: one instance per group (per device)
            kind = kinds.Name(group.kind)
            if group.kind == kinds.KIND_GPU:
                if not self.gpu_on_cpu:
                    raise self.fail(
                        f"{where}.kind",
                        "KIND_GPU, but Conveyor runs models on the CPU and this server has no "
                        "GPU; use KIND_CPU, or start the server with --gpu-instances-on-cpu to "
                        "run KIND_GPU groups on the CPU",
                    )
                self.warnings.append(
                    f"model {self.name!r}: {self.source} {where}.kind KIND_GPU runs its {count} "
                    "instance(s) on the CPU (--gpu-instances-on-cpu)"
                )
                kind = "KIND_CPU"
            elif group.gpus:
                self.warn(f"{where}.gpus")
            if group.kind == kinds.KIND_AUTO:
                kind = "KIND_CPU"  # as Triton completes it on a machine without a GPU
            groups.append(InstanceGroup(group.name or f"{self.name}_{i}", kind, count))
        return tuple(groups), (sum(g.count for g in groups) if groups else None)

    def dynamic_batching(self, m: pb.ModelConfig) -> tuple[dict[str, Any], dict[str, Any]]:
        batching = m.dynamic_batching
        where = "dynamic_batching"
        self.sort_fields(
            batching,
            where,
            {"preserve_ordering"},
            {"priority_queue_policy": "Conveyor has one queue policy per model"},
        )
        if m.max_batch_size == 0:
            raise self.fail(where, "needs max_batch_size > 0")
        for size in batching.preferred_batch_size:
            if not 1 <= size <= m.max_batch_size:
                raise self.fail(
                    f"{where}.preferred_batch_size",
                    f"{size} is not between 1 and max_batch_size {m.max_batch_size}",
                )
        levels, default = batching.priority_levels, batching.default_priority_level
        if levels and not 1 <= default <= levels:
            raise self.fail(
                f"{where}.default_priority_level",
                f"must be between 1 and priority_levels {levels}, got {default}",
            )
        if default and not levels:
            raise self.fail(f"{where}.default_priority_level", "needs priority_levels")
        policy = batching.default_queue_policy
        if policy.timeout_action == pb.ModelQueuePolicy.DELAY:
            raise self.fail(
                f"{where}.default_queue_policy.timeout_action",
                "DELAY is not supported: a request past its timeout is rejected (REJECT)",
            )
        raw = {
            "max_queue_delay_us": batching.max_queue_delay_microseconds,
            "preferred_batch_sizes": list(batching.preferred_batch_size),
        }
        extra: dict[str, Any] = {
            # Triton's 0 is "unbounded"; Conveyor never holds an unbounded queue.
            "max_queue_size": policy.max_queue_size or DEFAULT_MAX_QUEUE_SIZE,
            "allow_timeout_override": policy.allow_timeout_override
            or not policy.default_timeout_microseconds,
            "default_timeout_s": (policy.default_timeout_microseconds / 1e6) or None,
            "priority": (levels, default),
        }
        return raw, extra

    def version_policy(self, m: pb.ModelConfig, raw: dict[str, Any]) -> dict[str, Any]:
        policy = m.version_policy
        choice = policy.WhichOneof("policy_choice")
        if choice == "all":
            return {"latest_versions": None}
        if choice == "specific":
            if not policy.specific.versions:
                raise self.fail("version_policy.specific.versions", "lists no version")
            raw["versions"] = list(policy.specific.versions)
            return {}
        if choice == "latest":
            if policy.latest.num_versions < 1:
                raise self.fail("version_policy.latest.num_versions", "must be >= 1")
            return {"latest_versions": policy.latest.num_versions}
        return {}

    def warmup(self, m: pb.ModelConfig, config: ModelConfig) -> tuple[WarmupSample, ...]:
        samples = []
        for i, sample in enumerate(m.model_warmup):
            where = f"model_warmup[{i}]"
            if not sample.name:
                raise self.fail(f"{where}.name", "every warmup sample needs a name")
            batch_size = sample.batch_size or 1
            if config.batching and batch_size > config.max_batch_size:
                raise self.fail(
                    f"{where}.batch_size ({sample.name})",
                    f"{batch_size} exceeds max_batch_size {config.max_batch_size}",
                )
            if not config.batching and batch_size != 1:
                raise self.fail(
                    f"{where}.batch_size ({sample.name})", "must be 1 when max_batch_size is 0"
                )
            inputs = []
            for input_name, value in sorted(sample.inputs.items()):
                field = f"{where}.inputs[{input_name!r}]"
                kind = value.WhichOneof("input_data_type")
                if kind is None:
                    raise self.fail(field, "needs zero_data, random_data or input_data_file")
                file = None
                if kind == "input_data_file":
                    # As Triton: warmup data files live in the model folder's warmup/.
                    file = self.folder / "warmup" / value.input_data_file
                    if not file.is_file():
                        raise self.fail(
                            field, f"{self.name}/warmup/{value.input_data_file} does not exist"
                        )
                inputs.append(
                    WarmupInput(
                        input_name,
                        self.datatype(value.data_type, f"{field}.data_type"),
                        tuple(self.dims(list(value.dims), f"{field}.dims")),
                        {"zero_data": "zero", "random_data": "random"}.get(kind, "file"),
                        file,
                    )
                )
            samples.append(WarmupSample(sample.name, batch_size, tuple(inputs), sample.count or 1))
        return tuple(samples)
