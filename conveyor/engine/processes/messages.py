"""The small control messages between the engine, a model's zygote and its workers.

Only these are pickled; tensors travel through shared memory and a message carries where
they lie (:class:`TensorRef`). Every request carries an id that its reply repeats, so a
reply can never be matched to the wrong request. Errors cross as :class:`ConveyorError`
values built from ``conveyor.errors`` classes only, so the engine can always unpickle them.
"""

from __future__ import annotations

import dataclasses
import traceback
from pathlib import Path

import numpy as np

from conveyor.backends.base import SequenceInfo
from conveyor.backends.custom_metrics import Update
from conveyor.errors import ConveyorError, ModelError
from conveyor.protocol.request import InferenceRequest
from conveyor.repository.config import ModelConfig


class _Message:
    """Pickles as its class and field values: a third of the cost of a dataclass's default."""

    __slots__: tuple[str, ...] = ()

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return (type(self), tuple(getattr(self, name) for name in self.__slots__))


@dataclasses.dataclass(frozen=True, slots=True)
class TensorRef(_Message):
    """Where one tensor lies in a shared buffer.

    ``dtype``: numpy's string for a built-in dtype ("<f4"), the dtype itself for others
    (bfloat16), None for BYTES (length-prefixed elements).
    """

    name: str
    dtype: str | np.dtype | None
    shape: tuple[int, ...]
    offset: int
    nbytes: int


# engine -> worker (its input buffer's fd rides along when the worker does not have it yet)
@dataclasses.dataclass(frozen=True, slots=True)
class Execute(_Message):
    id: int
    inputs: tuple[TensorRef, ...]
    outputs: tuple[str, ...]
    buffer_size: int


# worker -> engine (its output buffer's fd rides along when the buffer is new)
@dataclasses.dataclass(frozen=True, slots=True)
class Executed(_Message):
    id: int
    outputs: tuple[TensorRef, ...]
    buffer_size: int


@dataclasses.dataclass(frozen=True, slots=True)
class RequestShape(_Message):
    """One request of an ExecuteRequests batch, but its tensors (in the shared buffer)."""

    outputs: tuple[str, ...]
    request_id: str | None
    sequence: SequenceInfo | None
    parameters: dict[str, object]


# engine -> worker: a batch whose requests the model takes one by one (``run_requests``).
# Request i's tensors are named "<i>/<name>" in the one input buffer.
@dataclasses.dataclass(frozen=True, slots=True)
class ExecuteRequests(_Message):
    id: int
    requests: tuple[RequestShape, ...]
    inputs: tuple[TensorRef, ...]
    buffer_size: int


# worker -> engine: request i's outputs are named "<i>/<name>"; errors[i] is its failure
@dataclasses.dataclass(frozen=True, slots=True)
class ExecutedRequests(_Message):
    id: int
    outputs: tuple[TensorRef, ...]
    errors: tuple[ConveyorError | None, ...]
    buffer_size: int


# worker -> engine, while it runs an execution (or starts): model code calls another model
# (Triton's Business Logic Scripting). Rare and small, so the tensors are pickled along.
@dataclasses.dataclass(frozen=True, slots=True)
class Call(_Message):
    id: int
    request: InferenceRequest


# engine -> worker: the called model's answer (or Failed with the Call's id)
@dataclasses.dataclass(frozen=True, slots=True)
class Returned(_Message):
    id: int
    outputs: dict[str, np.ndarray]


# worker -> engine, just before a reply or a Call: the model's custom-metric changes since
# the last one, for the engine process's store (which /metrics reads)
@dataclasses.dataclass(frozen=True, slots=True)
class MetricUpdates(_Message):
    updates: tuple[Update, ...]


# worker -> engine, once, first: it is ready to serve (or Failed(0, why) and it exits)
@dataclasses.dataclass(frozen=True, slots=True)
class Ready(_Message):
    pid: int


# worker or zygote -> engine
@dataclasses.dataclass(frozen=True, slots=True)
class Failed(_Message):
    id: int
    error: ConveyorError


# engine -> zygote, once, first: what to load, and the engine's import path
@dataclasses.dataclass(frozen=True, slots=True)
class Load(_Message):
    config: ModelConfig
    version_dir: Path
    sys_path: tuple[str, ...]


# zygote -> engine, once, after load(): the config as the backend completed it
@dataclasses.dataclass(frozen=True, slots=True)
class Loaded(_Message):
    config: ModelConfig
    separate_requests: bool  # the loaded model's: its batches go as ExecuteRequests
    checks_outputs: bool = True  # the loaded model's (LoadedModel.checks_outputs)


# engine -> zygote: fork a worker that serves the socket riding along as an fd
@dataclasses.dataclass(frozen=True, slots=True)
class Spawn(_Message):
    id: int
    index: int  # which instance the worker serves (a Triton model names it by this)


@dataclasses.dataclass(frozen=True, slots=True)
class Spawned(_Message):
    id: int
    pid: int


# engine -> zygote: collect a worker that has died or been killed, and say how it ended
@dataclasses.dataclass(frozen=True, slots=True)
class Reap(_Message):
    id: int
    pid: int


@dataclasses.dataclass(frozen=True, slots=True)
class Reaped(_Message):
    id: int
    pid: int
    reason: str  # e.g. "was killed by signal SIGSEGV", "exited with status 3"


def flatten_error(exc: BaseException, model: str) -> ConveyorError:
    """A picklable error for ``exc`` whose class the engine is sure to have.

    A model's own exception classes live in a module only the worker imported, and may not
    pickle at all; they become ModelError with the same words a thread instance would use.
    """
    if isinstance(exc, ConveyorError):
        base = next(c for c in type(exc).__mro__ if c.__module__ == ConveyorError.__module__)
        flat = base(exc.message)
        flat.model_traceback = exc.model_traceback
        return flat
    flat = ModelError(f"model {model!r} failed: {type(exc).__name__}: {exc}")
    # The traceback travels as text: the engine logs it with file and line.
    flat.model_traceback = "".join(traceback.format_exception(exc))
    return flat
