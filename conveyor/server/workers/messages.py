"""The messages between a front-end process and the engine process (pickled into the
frames of conveyor/ipc/frames.py).

A front end sends one message per data-plane call, each typed: :class:`Control` (one of
the quick reads and shared-memory calls of :class:`ControlMethod`, on the blocking
connection), :class:`Infer` (an infer call that has no lean frame), :class:`Stream` and
:class:`Generate` (streamed calls), :class:`Load` and :class:`Unload`; and
:class:`Cancel`. The engine answers each with one :class:`Reply` carrying the same id, and
a streamed call also with its responses, :class:`StreamItem` each, then one
:class:`StreamEnd`. :class:`Observe` (answered requests' latencies, for the one set of
histograms) needs no answer.
"""

from __future__ import annotations

import dataclasses
import enum
import pickle
from collections.abc import Mapping
from typing import Any

from conveyor.errors import ConveyorError
from conveyor.protocol.request import InferenceRequest
from conveyor.protocol.shared_memory import SharedMemoryUse


class ControlMethod(enum.StrEnum):
    """The data-plane methods a front end calls on the blocking connection: quick,
    thread-safe reads, the shared-memory registry (which has its own lock) and the
    settings. Each value is the ``DataPlane`` method's name."""

    SERVER_METADATA = "server_metadata"
    NOT_READY_REASON = "not_ready_reason"
    MODEL_NOT_READY_REASON = "model_not_ready_reason"
    MODEL_METADATA = "model_metadata"
    MODEL_CONFIG = "model_config"
    STATISTICS = "statistics"
    REPOSITORY_INDEX = "repository_index"
    IS_DECOUPLED = "is_decoupled"
    OPENAI_EMBEDDINGS = "openai_embeddings"
    OPENAI_MODELS = "openai_models"
    REGISTER_SYSTEM_SHARED_MEMORY = "register_system_shared_memory"
    UNREGISTER_SYSTEM_SHARED_MEMORY = "unregister_system_shared_memory"
    SYSTEM_SHARED_MEMORY_STATUS = "system_shared_memory_status"
    REGISTER_CUDA_SHARED_MEMORY = "register_cuda_shared_memory"
    UNREGISTER_CUDA_SHARED_MEMORY = "unregister_cuda_shared_memory"
    CUDA_SHARED_MEMORY_STATUS = "cuda_shared_memory_status"
    LOG_SETTINGS = "log_settings"
    UPDATE_LOG_SETTINGS = "update_log_settings"
    TRACE_SETTINGS = "trace_settings"


@dataclasses.dataclass(frozen=True, slots=True)
class Control:
    call_id: int
    method: ControlMethod
    args: tuple[Any, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Infer:
    """An infer call without a lean frame (BYTES tensors, shared memory, classification)."""

    call_id: int
    request: InferenceRequest
    classifications: Mapping[str, int] | None = None
    wait_limit: float | None = None
    shared_memory: SharedMemoryUse | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Stream:
    call_id: int
    request: InferenceRequest


@dataclasses.dataclass(frozen=True, slots=True)
class Generate:
    """The generate extension's call: built into a request in the engine process, which
    has the model's config."""

    call_id: int
    model: str
    version: str | None
    body: dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Load:
    call_id: int
    name: str
    parameters: dict[str, object]


@dataclasses.dataclass(frozen=True, slots=True)
class Unload:
    call_id: int
    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    call_id: int
    value: Any = None
    error: BaseException | None = None
    # For an infer call: the request id, model and version the engine resolved.
    served: tuple[str | None, str | None, str | None] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Cancel:
    """The front end's client went away: drop the request if it is still queued."""

    call_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class StreamItem:
    """One response of a streamed call (``stream`` or ``generate``)."""

    call_id: int
    item: Any


@dataclasses.dataclass(frozen=True, slots=True)
class StreamEnd:
    """A streamed call's last message: no response follows (``error``: why it failed)."""

    call_id: int
    error: BaseException | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Observe:
    """Answered requests' latencies: (model, version, seconds, protocol) each, sent in
    batches so they cost the engine process no wakeup of its own per request."""

    samples: tuple[tuple[str, str, float, str], ...]


def portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling (Conveyor's errors do, keeping their status);
    otherwise a ConveyorError (an internal error) that says what it was."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return ConveyorError(f"{type(error).__name__}: {error}")
    return error
