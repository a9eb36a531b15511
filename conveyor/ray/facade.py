"""The engine the ingress's data plane sees: each inference forwarded to its model's
deployment through a Ray Serve handle; metadata from the replicas' descriptions, read once.

The data plane (``conveyor/server/dataplane.py``) needs only what this class has:
readiness, model lookups, the repository index, statistics, ``submit_request`` (a future
at once) and ``stream_request``: :class:`~conveyor.engine.interface.ServingEngine`.
``submit_request`` runs on the ingress's event loop: it starts a task that awaits
the handle's response and completes the future, so the loop never waits on a replica.

A request whose replica died before it answered (its process killed, its node lost) is
sent again, at most :data:`RESENDS` times: inference reads its inputs and changes nothing,
and Ray Serve routes the retry to a live replica. A sequence request is never sent again
(its model's state may have changed): a model with sequence_batching runs one replica,
which holds every sequence's state, and a sequence whose replica died is lost, as when
``conveyor serve`` restarts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from conveyor.engine import ModelInfo, ModelState, ModelStatistics, RepositoryEntry
from conveyor.engine.engine import UNKNOWN_MODEL, version_number
from conveyor.engine.stats import StatsRecorder
from conveyor.errors import (
    ConveyorError,
    ModelNotFound,
    Unavailable,
    Unsupported,
)
from conveyor.futures import InferFuture, RequestTimeline
from conveyor.protocol.request import InferenceRequest
from conveyor.ray.messages import Answer, ServedModel
from conveyor.streams import ResponseStream

RESENDS = 2
NO_STREAMING = (
    "streaming (decoupled models, generate_stream) is not served through Ray Serve by "
    "Conveyor; serve this model with conveyor serve"
)


class ModelHandle(Protocol):
    """What the facade uses of a Ray Serve DeploymentHandle to a ModelReplica."""

    @property
    def infer(self) -> Any: ...


class RemoteEngine:
    """Models served by Ray Serve deployments, looked up and called like an Engine.

    ``handles``: model name -> handle to its deployment; ``served``: every version each
    deployment serves (its replicas' ``describe()``).
    """

    def __init__(
        self,
        handles: Mapping[str, ModelHandle],
        served: Mapping[str, Sequence[ServedModel]],
        replica_death: tuple[type[BaseException], ...],
    ) -> None:
        self._handles = dict(handles)
        self._versions = {name: {m.version: m for m in models} for name, models in served.items()}
        self._replica_death = replica_death
        self._stats = {
            (m.name, m.version): StatsRecorder(m.name, m.version)
            for models in served.values()
            for m in models
        }
        self._pending: dict[tuple[str, int], int] = dict.fromkeys(self._stats, 0)
        self._tasks: set[asyncio.Task[None]] = set()  # held, so no task is collected early

    # -- readiness and lookups ---------------------------------------------------------------

    @property
    def ready(self) -> bool:
        # The ingress starts after every model deployment answered describe(); Ray Serve
        # replaces an unhealthy replica on its own.
        return True

    def failed_models(self) -> list[RepositoryEntry]:
        return []

    def _served(self, name: str, version: int | str | None) -> ServedModel:
        versions = self._versions.get(name)
        if not versions:
            raise ModelNotFound(
                f"{UNKNOWN_MODEL}'{name}' is not found: model {name!r} is not deployed"
            )
        if version is None or version == "":
            return versions[max(versions)]
        number = version_number(version)
        found = versions.get(number)
        if found is None:
            raise ModelNotFound(
                f"{UNKNOWN_MODEL}'{name}' version {number} is not found: model {name!r} has "
                f"no version {number}; deployed versions are "
                f"{', '.join(map(str, sorted(versions)))}"
            )
        return found

    def model(self, name: str, version: int | str | None = None) -> ModelInfo:
        served = self._served(name, version)
        return ModelInfo(served.name, served.version, served.config, served.platform, True)

    def model_names(self) -> list[str]:
        return sorted(self._versions)

    def model_versions(self, name: str) -> list[int]:
        return sorted(self._versions.get(name, {}))

    def repository_index(self) -> list[RepositoryEntry]:
        return [
            RepositoryEntry(name, str(version), ModelState.READY)
            for name in sorted(self._versions)
            for version in sorted(self._versions[name])
        ]

    def statistics(
        self, name: str | None = None, version: int | str | None = None
    ) -> list[ModelStatistics]:
        """The ingress's view: each answered request's round trip through Ray counts as
        its compute time (a replica's own queue and compute split is per replica)."""
        if name is None:
            keys = sorted(self._stats)
        elif version is None or version == "":
            self._served(name, None)
            keys = [(name, v) for v in self.model_versions(name)]
        else:
            served = self._served(name, version)
            keys = [(served.name, served.version)]
        return [self._stats[key].snapshot(self._pending[key]) for key in keys]

    # -- repository control: Ray Serve's, not ours --------------------------------------------

    def load_model(self, name: str, config: str | None = None, files: object = None) -> None:
        raise Unsupported(
            f"cannot load {name!r} through the ingress: on Ray Serve the deployed "
            "repository is changed by deploying it again (conveyor ray deploy)"
        )

    def unload_model(self, name: str) -> None:
        raise Unsupported(
            f"cannot unload {name!r} through the ingress: on Ray Serve the deployed "
            "repository is changed by deploying it again (conveyor ray deploy)"
        )

    # -- inference -----------------------------------------------------------------------------

    def submit_request(self, request: InferenceRequest, **unused: object) -> InferFuture:
        """Forward ``request`` to its model's deployment; return its future at once.

        The engine's other arguments are taken and not used: a ``timeline`` is not stamped
        (the queue and compute happen in the replica) and ``destinations`` are not written
        (no shared memory through Ray). The request's parameters reach the model."""
        served = self._served(request.model, request.version)
        if served.config.decoupled:
            raise Unsupported(NO_STREAMING)
        # The replica serves the version chosen here; views over the HTTP body become
        # owned arrays when Ray pickles them.
        request = request._replace(version=str(served.version))
        future = InferFuture()
        future.request_id = request.id
        future.model_name = served.name
        future.model_version = str(served.version)
        task = asyncio.get_running_loop().create_task(
            self._forward(self._handles[served.name], request, future, served)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return future

    async def _forward(
        self,
        handle: ModelHandle,
        request: InferenceRequest,
        future: InferFuture,
        served: ServedModel,
    ) -> None:
        key = (served.name, served.version)
        self._pending[key] += 1
        started = time.perf_counter_ns()
        try:
            answer = await self._call(handle, request, future)
        except Exception as exc:
            answer = Answer(None, None, _unavailable(served.name, exc))
        finally:
            self._pending[key] -= 1
        elapsed = time.perf_counter_ns() - started
        if future.done():  # cancelled by the front end meanwhile
            return
        if answer.error is not None or answer.outputs is None:
            self._stats[key].record_failure(elapsed)
            future.set_exception(answer.error or ConveyorError("the replica sent no outputs"))
            return
        self._stats[key].record_execution([0], [elapsed], 1, 0, elapsed, 0)
        future.set_result(answer.outputs)

    async def _call(
        self, handle: ModelHandle, request: InferenceRequest, future: InferFuture
    ) -> Answer:
        for resend in range(RESENDS + 1):
            response = handle.infer.remote(request)
            future.add_done_callback(_cancel_with(response))
            try:
                answer: Answer = await response
                return answer
            except self._replica_death:
                if resend == RESENDS or future.done() or request.sequence is not None:
                    raise
        raise AssertionError("unreachable")

    def stream_request(
        self, request: InferenceRequest, *, timeline: RequestTimeline | None = None
    ) -> ResponseStream:
        self._served(request.model, request.version)
        raise Unsupported(NO_STREAMING)


def _cancel_with(response: Any) -> Any:
    """A done-callback: the caller cancelled the future, so cancel the Ray request too."""

    def cancel(future: InferFuture) -> None:
        if future.cancelled():
            response.cancel()

    return cancel


def _unavailable(model: str, exc: BaseException) -> ConveyorError:
    """A failure of Ray itself (no replica, a replica that died past every resend)."""
    if isinstance(exc, ConveyorError):
        return exc
    return Unavailable(
        f"model {model!r}: its Ray Serve deployment did not answer: "
        f"{type(exc).__name__}: {exc}".strip()
    )
