"""A model's configuration: the typed form of ``config.toml`` and its validation.

Every key is documented in docs/configuration.md. Unknown keys are an error
that names the key, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conveyor.errors import RepositoryError
from conveyor.protocol.datatypes import DATATYPES, is_datatype
from conveyor.repository.backend_catalog import backend_names
from conveyor.repository.ensemble import ENSEMBLE, EnsembleStep, check_graph, parse_steps
from conveyor.repository.openai_spec import OpenAIEmbeddings, parse_openai
from conveyor.repository.ray_scaling import RayScaling, parse_ray_scaling, toml_key
from conveyor.repository.sequences import SequenceBatching, parse_sequence_batching
from conveyor.repository.tables import unknown_key


class InstanceKind(enum.StrEnum):
    """How a model's instances run (``instance_kind`` in config.toml)."""

    THREAD = "thread"  # threads over one loaded copy (or one per instance if not thread-safe)
    PROCESS = "process"  # worker processes forked from one loaded copy, for GIL-bound code


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One input or output. ``shape`` excludes the batch dimension when batching is on."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    optional: bool = False
    # Inputs only: requests whose non-batch dimensions differ may share one execution; each
    # is padded with zeros to the batch's largest size in every dimension (Triton's
    # allow_ragged_batch, done by padding; see docs/configuration.md#ragged-batching).
    allow_ragged_batch: bool = False
    # From config.pbtxt only. ``reshape``: the shape the model itself takes or gives (requests
    # and responses use ``shape``); ``format``: Triton's FORMAT_NHWC/NCHW, reported, no effect.
    reshape: tuple[int, ...] | None = None
    format: str | None = None
    # An output's class labels (Triton's label_filename, also a config.toml key): a file in the
    # model's folder, one label per line, line i naming class i. Read when the model is read
    # from its folder (``labels``), so a classification request never touches the disk.
    label_filename: str | None = None
    labels: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DynamicBatching:
    max_queue_delay_us: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()
    # The most elements a batch's ragged input may hold once padded (rows x the longest
    # request's row): 0 = no limit. config.toml only; Triton has no such field.
    max_padded_elements: int = 0
    # Triton's priority levels (config.pbtxt): 0 = none. With N levels a request's priority
    # is a level, 1 the highest to N the lowest; 0 or one past N takes the default level.
    priority_levels: int = 0
    default_priority_level: int = 0


@dataclasses.dataclass(frozen=True)
class InstanceGroup:
    """One of config.pbtxt's instance groups, as reported back in the model config."""

    name: str
    kind: str  # Triton's KIND_CPU, KIND_MODEL, KIND_AUTO (KIND_GPU only when run on CPU)
    count: int


@dataclasses.dataclass(frozen=True)
class WarmupInput:
    name: str
    datatype: str
    shape: tuple[int, ...]  # without the batch dimension, which batch_size adds when batching
    data: str  # "zero", "random" or "file"
    file: Path | None = None  # for "file": raw tensor bytes (BYTES: 4-byte length prefixes)


@dataclasses.dataclass(frozen=True)
class WarmupSample:
    """One model_warmup entry: requests run before the model version reports ready."""

    name: str
    batch_size: int
    inputs: tuple[WarmupInput, ...]
    count: int = 1


DEFAULT_MAX_QUEUE_SIZE = 1024  # requests a model version holds waiting; past it, QueueFull


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    name: str
    backend: str
    max_batch_size: int = 0
    instances: int | None = None  # None: chosen from the machine's cores, see default_instances
    instance_kind: InstanceKind = InstanceKind.THREAD
    max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE
    # Seconds one execution may take: past it, its requests fail and a process instance's
    # worker is killed and replaced; a thread instance (which cannot be stopped) is taken
    # out of service until the execution returns.
    execution_timeout_s: float | None = None
    dynamic_batching: DynamicBatching | None = None
    # A stateful model: requests carry a sequence id and go to their sequence's slot.
    sequence_batching: SequenceBatching | None = None
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    versions: tuple[int, ...] | None = None  # None: serve the latest_versions newest
    backend_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # The rest come from config.pbtxt only (config.toml keeps their defaults).
    # parameters the backend does not read (Triton's map is free-form): reported in the
    # config as given, never passed to the backend.
    ignored_parameters: Mapping[str, str] = dataclasses.field(default_factory=dict)
    latest_versions: int | None = 1  # when versions is None; None: every version
    # A request with no timeout of its own gets this one (seconds in the queue); with
    # allow_timeout_override false, a request's own timeout is ignored for it.
    default_timeout_s: float | None = None
    allow_timeout_override: bool = True
    instance_groups: tuple[InstanceGroup, ...] = ()  # empty: one KIND_CPU group
    model_filename: str | None = None  # the version folder's model file; None: the backend's
    warmup: tuple[WarmupSample, ...] = ()
    # Answers a request with zero, one or many responses (Triton's decoupled transaction
    # policy): served by Engine.stream and streaming front ends, refused by unary infer.
    decoupled: bool = False
    # backend = "ensemble": the steps one request runs (config.toml's [[steps]], or
    # config.pbtxt's ensemble_scheduling), already checked to form a graph without cycles.
    ensemble_steps: tuple[EnsembleStep, ...] = ()
    # Replicas and autoscaling when the repository is deployed on Ray Serve (conveyor ray);
    # conveyor serve ignores it.
    ray: RayScaling = dataclasses.field(default_factory=RayScaling)
    # Served on OpenAI's /v1/embeddings (config.toml's [openai]); None: not served there.
    openai: OpenAIEmbeddings | None = None

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 0

    def instance_count(self) -> int:
        return self.instances if self.instances is not None else default_instances()


def default_instances() -> int:
    """One instance per core: with one intra-op thread each, instances x threads = cores."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


_TOP_KEYS = {
    "backend",
    "max_batch_size",
    "instances",
    "instance_kind",
    "max_queue_size",
    "execution_timeout_s",
    "dynamic_batching",
    "sequence_batching",
    "inputs",
    "outputs",
    "versions",
    "decoupled",
    "steps",
    "ray",
    "openai",
}
_TENSOR_KEYS = {"name", "datatype", "shape", "optional"}
_INPUT_KEYS = _TENSOR_KEYS | {"allow_ragged_batch"}
_OUTPUT_KEYS = _TENSOR_KEYS | {"label_filename"}
_BATCHING_KEYS = {"max_queue_delay_us", "preferred_batch_sizes", "max_padded_elements"}


def load_config_file(path: Path, name: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise RepositoryError(f"model {name!r}: {path.name} is not valid TOML: {exc}") from None


def parse_config(name: str, raw: Mapping[str, Any], *, backend: str | None = None) -> ModelConfig:
    """Validate a raw TOML mapping into a ModelConfig; every error names model and key."""

    def fail(message: str) -> RepositoryError:
        return RepositoryError(f"model {name!r}: {message}")

    # Each backend's options table, [onnxruntime] or [python], is named after the backend.
    sections = set(backend_names())
    if problem := unknown_key(raw, _TOP_KEYS | sections, None):
        raise fail(problem)

    def integer(key: str, value: Any, minimum: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise fail(f"{key} must be an integer >= {minimum}, got {value!r}")
        return value

    chosen_backend = raw.get("backend", backend)
    if not isinstance(chosen_backend, str) or not chosen_backend:
        choices = " or ".join(f'"{known}"' for known in backend_names())
        raise fail(f"no backend: set backend = {choices} in config.toml")

    max_batch_size = integer("max_batch_size", raw.get("max_batch_size", 0), 0)
    instances = raw.get("instances")
    if instances is not None:
        instances = integer("instances", instances, 1)
    max_queue_size = integer("max_queue_size", raw.get("max_queue_size", DEFAULT_MAX_QUEUE_SIZE), 1)
    try:
        instance_kind = InstanceKind(raw.get("instance_kind", InstanceKind.THREAD))
    except ValueError:
        raise fail(
            f"instance_kind must be one of {', '.join(InstanceKind)}, got {raw['instance_kind']!r}"
        ) from None
    execution_timeout_s = raw.get("execution_timeout_s")
    if execution_timeout_s is not None:
        if (
            not isinstance(execution_timeout_s, int | float)
            or isinstance(execution_timeout_s, bool)
            or not 0 < execution_timeout_s < float("inf")
        ):
            raise fail(
                f"execution_timeout_s must be a positive number of seconds, "
                f"got {execution_timeout_s!r}"
            )
        execution_timeout_s = float(execution_timeout_s)

    versions = raw.get("versions")
    if versions is not None:
        if not isinstance(versions, list) or not versions:
            raise fail(f"versions must be a non-empty list of integers, got {versions!r}")
        versions = tuple(integer("versions[]", v, 0) for v in versions)

    batching = None
    if "dynamic_batching" in raw:
        section = raw["dynamic_batching"]
        if not isinstance(section, dict):
            raise fail("dynamic_batching must be a table ([dynamic_batching])")
        if problem := unknown_key(section, _BATCHING_KEYS, "[dynamic_batching]"):
            raise fail(problem)
        if max_batch_size == 0:
            raise fail("dynamic_batching needs max_batch_size > 0")
        preferred = section.get("preferred_batch_sizes", [])
        if not isinstance(preferred, list):
            raise fail("dynamic_batching.preferred_batch_sizes must be a list of integers")
        preferred_sizes = tuple(sorted(integer("preferred_batch_sizes[]", p, 1) for p in preferred))
        if preferred_sizes and preferred_sizes[-1] > max_batch_size:
            raise fail(
                f"preferred batch size {preferred_sizes[-1]} exceeds max_batch_size "
                f"{max_batch_size}"
            )
        batching = DynamicBatching(
            max_queue_delay_us=integer(
                "dynamic_batching.max_queue_delay_us", section.get("max_queue_delay_us", 0), 0
            ),
            preferred_batch_sizes=preferred_sizes,
            max_padded_elements=integer(
                "dynamic_batching.max_padded_elements", section.get("max_padded_elements", 0), 0
            ),
        )

    decoupled = raw.get("decoupled", False)
    if not isinstance(decoupled, bool):
        raise fail(f"decoupled must be true or false, got {decoupled!r}")
    if decoupled and instance_kind is InstanceKind.PROCESS:
        raise fail(
            'a decoupled model runs on thread instances only; set instance_kind = "thread" '
            "(process instances send back one answer per request)"
        )
    sequence_batching = None
    if "sequence_batching" in raw:
        if batching is not None:
            raise fail("use dynamic_batching or sequence_batching, not both")
        sequence_batching = parse_sequence_batching(raw["sequence_batching"], fail, max_batch_size)

    options = raw.get(chosen_backend, {})
    if not isinstance(options, dict):
        raise fail(f"[{chosen_backend}] must be a table")

    inputs = _tensors(raw.get("inputs", []), "inputs", fail)
    outputs = _tensors(raw.get("outputs", []), "outputs", fail)
    if batching and batching.max_padded_elements and not any(t.allow_ragged_batch for t in inputs):
        raise fail(
            "dynamic_batching.max_padded_elements bounds the padded size of ragged inputs; "
            "declare allow_ragged_batch = true on the inputs it should bound"
        )
    steps = _ensemble_steps(name, raw, chosen_backend, inputs, outputs, fail)
    ray = parse_ray_scaling(raw.get("ray", {}), fail, toml_key)
    openai = None
    if "openai" in raw:
        openai = parse_openai(
            raw["openai"],
            {t.name: t.datatype for t in inputs},
            {t.name: t.datatype for t in outputs},
            fail,
        )

    return ModelConfig(
        name=name,
        backend=chosen_backend,
        max_batch_size=max_batch_size,
        instances=instances,
        instance_kind=instance_kind,
        max_queue_size=max_queue_size,
        execution_timeout_s=execution_timeout_s,
        dynamic_batching=batching,
        sequence_batching=sequence_batching,
        inputs=inputs,
        outputs=outputs,
        versions=versions,
        backend_options=dict(options),
        decoupled=decoupled,
        ensemble_steps=steps,
        ray=ray,
        openai=openai,
    )


def _ensemble_steps(
    name: str,
    raw: Mapping[str, Any],
    backend: str,
    inputs: tuple[TensorSpec, ...],
    outputs: tuple[TensorSpec, ...],
    fail: Any,
) -> tuple[EnsembleStep, ...]:
    """An ensemble's [[steps]], checked as a graph; other backends may not have steps."""
    if backend != ENSEMBLE:
        if "steps" in raw:
            raise fail(f'steps are for ensembles (backend = "{ENSEMBLE}"), not {backend!r} models')
        return ()
    # An ensemble runs no code of its own: its steps' models queue, batch and run.
    for key in ("dynamic_batching", "instances", "instance_kind", "execution_timeout_s"):
        if key in raw:
            raise fail(f"{key} has no meaning for an ensemble (its steps' models have their own)")
    if not inputs or not outputs:
        raise fail("an ensemble lists its inputs and outputs ([[inputs]], [[outputs]])")
    steps = parse_steps(name, raw.get("steps"))
    check_graph(name, (s.name for s in inputs), (s.name for s in outputs), steps)
    return steps


def _tensors(raw: Any, section: str, fail: Any) -> tuple[TensorSpec, ...]:
    if not isinstance(raw, list):
        raise fail(f"{section} must be an array of tables ([[{section}]])")
    specs = []
    for index, entry in enumerate(raw):
        where = f"{section}[{index}]"
        if not isinstance(entry, dict):
            raise fail(f"{where} must be a table")
        known = _OUTPUT_KEYS if section == "outputs" else _INPUT_KEYS
        if problem := unknown_key(entry, known, where):
            raise fail(problem)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise fail(f"{where} needs a name")
        datatype = entry.get("datatype")
        if not isinstance(datatype, str) or not is_datatype(datatype):
            raise fail(
                f"{where} ({name}): datatype {datatype!r} is not one of {', '.join(DATATYPES)}"
            )
        shape = entry.get("shape")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= -1 for d in shape
        ):
            raise fail(f"{where} ({name}): shape must be a list of integers >= -1, got {shape!r}")
        optional = entry.get("optional", False)
        if not isinstance(optional, bool):
            raise fail(f"{where} ({name}): optional must be true or false")
        ragged = entry.get("allow_ragged_batch", False)
        if not isinstance(ragged, bool):
            raise fail(f"{where} ({name}): allow_ragged_batch must be true or false")
        label_filename = entry.get("label_filename")
        if label_filename is not None and (
            not isinstance(label_filename, str)
            or not label_filename
            or Path(label_filename).name != label_filename
            or label_filename in (".", "..")
        ):
            raise fail(
                f"{where} ({name}): label_filename must be the name of a file in the model's "
                f"folder (no path), got {label_filename!r}"
            )
        specs.append(
            TensorSpec(
                name,
                datatype,
                tuple(shape),
                optional,
                allow_ragged_batch=ragged,
                label_filename=label_filename,
            )
        )
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise fail(f"{section} has a duplicate name")
    return tuple(specs)


def read_labels(config: ModelConfig, folder: Path) -> ModelConfig:
    """``config`` with every output's ``label_filename`` read into its ``labels``.

    A missing or unreadable label file is a RepositoryError naming the output and the file:
    the model would otherwise answer classification requests without its labels.
    """
    outputs = []
    for spec in config.outputs:
        if spec.label_filename is not None:
            path = folder / spec.label_filename
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise RepositoryError(
                    f"model {config.name!r}: output {spec.name!r}: label_filename "
                    f"{spec.label_filename!r} cannot be read from {str(folder)!r}: {exc}"
                ) from None
            spec = dataclasses.replace(spec, labels=tuple(text.splitlines()))
        outputs.append(spec)
    return dataclasses.replace(config, outputs=tuple(outputs))
