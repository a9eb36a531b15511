"""An ensemble's steps (Triton's ``ensemble_scheduling``) and the checks on their graph.

An ensemble names tensors: its own inputs, then whatever its steps produce. Each step maps
its model's inputs to ensemble tensors (``input_map``: model input -> ensemble tensor) and its
model's outputs to new ones (``output_map``: model output -> ensemble tensor). The checks here
need nothing but the config: every tensor has one producer, every step input and ensemble
output is produced, and no step waits on itself. Whether the step models exist and have the
mapped inputs and outputs is checked when the ensemble loads (conveyor/engine/ensemble.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from conveyor.errors import RepositoryError
from conveyor.repository.tables import unknown_key

ENSEMBLE = "ensemble"  # the backend (and V2 platform) name of an ensemble
# How deep ensembles may nest (an ensemble whose step is an ensemble is 2 deep). Each level
# adds a few frames to the stack of the load that loads its steps, and of the thread whose
# finished step completes every enclosing ensemble in turn: 32 levels stay a few hundred
# frames under Python's recursion limit of 1,000, while real pipelines nest two or three.
MAX_NESTING = 32
_STEP_KEYS = {"model", "version", "input_map", "output_map"}


@dataclasses.dataclass(frozen=True)
class EnsembleStep:
    model: str
    version: int | None  # None: the model's latest version (Triton's model_version -1)
    input_map: Mapping[str, str]  # the model's input -> the ensemble tensor it reads
    output_map: Mapping[str, str]  # the model's output -> the ensemble tensor it writes

    def label(self, index: int) -> str:
        return f"step {index} (model {self.model!r})"


def parse_steps(name: str, raw: Any) -> tuple[EnsembleStep, ...]:
    """config.toml's ``[[steps]]`` tables (config.pbtxt's steps come here in the same shape)."""

    def fail(message: str) -> RepositoryError:
        return RepositoryError(f"model {name!r}: {message}")

    if not isinstance(raw, list) or not raw:
        raise fail('an ensemble needs steps: one [[steps]] table per step (backend = "ensemble")')
    steps = []
    for index, entry in enumerate(raw):
        where = f"steps[{index}]"
        if not isinstance(entry, dict):
            raise fail(f"{where} must be a table")
        if problem := unknown_key(entry, _STEP_KEYS, where):
            raise fail(problem)
        model = entry.get("model")
        if not isinstance(model, str) or not model:
            raise fail(f"{where} needs model (the name of the model it runs)")
        version = entry.get("version", -1)
        if not isinstance(version, int) or isinstance(version, bool) or version < -1:
            raise fail(f"{where}.version must be a version number or -1 (latest), got {version!r}")
        maps = []
        for key in ("input_map", "output_map"):
            mapping = entry.get(key)
            if (
                not isinstance(mapping, dict)
                or not mapping
                or not all(isinstance(k, str) and k for k in mapping)
                or not all(isinstance(v, str) and v for v in mapping.values())
            ):
                raise fail(
                    f"{where}.{key} must be a non-empty table of {model}'s tensor names to "
                    f'ensemble tensor names, e.g. {{ INPUT0 = "raw" }}, got {mapping!r}'
                )
            maps.append(dict(mapping))
        steps.append(EnsembleStep(model, None if version in (-1, 0) else version, *maps))
    return tuple(steps)


def too_deep(name: str, nesting: int) -> RepositoryError:
    """The refusal of an ensemble nested past MAX_NESTING."""
    return RepositoryError(
        f"model {name!r}: ensembles nest {nesting} deep here (an ensemble whose step is an "
        f"ensemble is 2 deep); the most this server loads is {MAX_NESTING}"
    )


def check_graph(
    name: str, inputs: Iterable[str], outputs: Iterable[str], steps: tuple[EnsembleStep, ...]
) -> tuple[int, ...]:
    """The steps in an order where each runs after the steps it reads from.

    RepositoryError names the step and tensor: a tensor written twice, a step input that
    nothing produces, an ensemble output that nothing produces, or a cycle.
    """

    def fail(message: str) -> RepositoryError:
        return RepositoryError(f"model {name!r}: ensemble {message}")

    producer: dict[str, str] = {tensor: "the ensemble's inputs" for tensor in inputs}
    writer: dict[str, int] = {}
    for index, step in enumerate(steps):
        for tensor in step.output_map.values():
            if tensor in producer:
                raise fail(
                    f"{step.label(index)} writes tensor {tensor!r}, which {producer[tensor]} "
                    "already provide(s); every ensemble tensor has one producer"
                )
            producer[tensor] = step.label(index)
            writer[tensor] = index
    for index, step in enumerate(steps):
        for model_input, tensor in step.input_map.items():
            if tensor not in producer:
                raise fail(
                    f"{step.label(index)} input {model_input!r} reads tensor {tensor!r}, which "
                    "no ensemble input and no step output provides"
                )
    for tensor in outputs:
        if tensor not in producer or tensor not in writer:
            raise fail(
                f"output {tensor!r} is produced by no step (map a step's output to it in "
                "output_map)"
            )
    return _topological_order(steps, writer, fail)


def _topological_order(
    steps: tuple[EnsembleStep, ...], writer: dict[str, int], fail: Any
) -> tuple[int, ...]:
    """Round by round: the steps that wait on nothing, then those that waited only on them,
    …, each round in step order. Linear in steps and edges (a config a client sends with
    a load request may hold many steps)."""
    waits_on = [{writer[t] for t in step.input_map.values() if t in writer} for step in steps]
    unblocks: list[list[int]] = [[] for _ in steps]
    for index, before in enumerate(waits_on):
        for earlier in before:
            unblocks[earlier].append(index)
    waiting = [len(before) for before in waits_on]
    ready = [index for index, count in enumerate(waiting) if count == 0]
    order: list[int] = []
    while ready:
        order += ready
        after: list[int] = []
        for index in ready:
            for later in unblocks[index]:
                waiting[later] -= 1
                if waiting[later] == 0:
                    after.append(later)
        ready = sorted(after)
    if len(order) < len(steps):
        done = set(order)
        labels = ", ".join(steps[i].label(i) for i in range(len(steps)) if i not in done)
        raise fail(f"steps form a cycle (each waits on another's output): {labels}")
    return tuple(order)
