"""The in-process engine: models from a repository, ``submit`` -> future, ``close`` drains.

``submit`` does only cheap checks on the caller's thread and queues the request; every
model version's instance threads do the compute. Nothing here knows about HTTP or gRPC.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import threading
import traceback
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conveyor.backends.base import Destinations, ModelCaller, SequenceInfo
from conveyor.engine.decoupled import start_stream
from conveyor.engine.ensemble import EnsembleVersion, StepModels
from conveyor.engine.model import ModelActivity, ModelVersion
from conveyor.engine.stats import ModelStatistics
from conveyor.errors import (
    ConveyorError,
    InvalidInput,
    ModelLoadFailed,
    ModelNotFound,
    ModelNotReady,
    ModelUnavailable,
    ShuttingDown,
    Unavailable,
    Unsupported,
)
from conveyor.futures import InferFuture, Outputs, RequestTimeline
from conveyor.protocol.request import InferenceRequest
from conveyor.repository.checks import model_warnings, repository_warnings
from conveyor.repository.config import ModelConfig
from conveyor.repository.ensemble import ENSEMBLE
from conveyor.repository.layout import ModelSource, Repository, SourceOverride
from conveyor.repository.watch import RepositoryWatch
from conveyor.repository.written import remove_written, write_model_folder
from conveyor.streams import DEFAULT_BUFFER, ResponseStream

log = logging.getLogger("conveyor.engine")
# What the engine serves under a model name: a loaded model version, or an ensemble's.
ServedVersion = ModelVersion | EnsembleVersion
# Triton's prefix for a model (version) it cannot serve; clients match on it.
UNKNOWN_MODEL = "Request for unknown model: "
# Triton's answer to a load or unload request while it polls the repository.
POLLING_REFUSAL = "explicit model load / unload is not allowed if polling is enabled"


class ModelState(enum.StrEnum):
    """A model's state, in the words of the V2 repository extension (and so on the wire)."""

    READY = "READY"
    UNAVAILABLE = "UNAVAILABLE"
    LOADING = "LOADING"
    UNLOADING = "UNLOADING"


class ModelControl(enum.StrEnum):
    """Which models load, and who may load and unload them."""

    NONE = "none"  # every model of the repository loads at start; no load/unload requests
    EXPLICIT = "explicit"  # only the startup models load at start; load/unload requests allowed
    # every model loads at start; the repository is scanned for changes (poll_repository),
    # which load, reload and unload models; no load/unload requests
    POLL = "poll"


@dataclasses.dataclass(frozen=True)
class RepositoryEntry:
    """One version of a model of the repository and its state, as V2 lists it.

    ``version`` is the V2 wire form: the version number as a string, "" when none is loaded.
    """

    name: str
    version: str
    state: ModelState
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class _Status:
    """What the engine last did with a model: its state and the versions it serves."""

    state: ModelState
    versions: tuple[int, ...] = ()
    reason: str = ""
    # Versions the last load tried and failed to load, with why: a request naming one is
    # answered as Triton answers it (the version is there, not at ready state).
    failed: Mapping[int, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    name: str
    version: int
    config: ModelConfig
    platform: str
    ready: bool


class Engine:
    """Serve the models of a repository in-process.

    >>> engine = Engine.from_repository()            # the built-in examples
    >>> future = engine.submit("tiny", {"INPUT0": np.ones((1, 16), np.float32)})
    >>> future.result(timeout=5)["OUTPUT0"]
    """

    def __init__(
        self,
        repository: Repository,
        *,
        model_control: ModelControl | str = ModelControl.NONE,
        startup_models: Iterable[str] | None = None,
    ) -> None:
        try:
            self.model_control = ModelControl(model_control)
        except ValueError:
            raise ValueError(
                f"model_control must be one of {', '.join(ModelControl)}, got {model_control!r}"
            ) from None
        self.repository = repository
        self._lock = threading.Lock()
        # name -> version -> running model; replaced (never mutated) so submit reads it lock-free
        self._running: dict[str, dict[int, ServedVersion]] = {}
        self._latest: dict[str, ServedVersion] = {}
        self._states: dict[str, _Status] = {}
        # Models this engine was asked to serve (at start, or by load_model) and not unloaded
        # since: one of them that is UNAVAILABLE failed to load.
        self._wanted: set[str] = set()
        self._closing = False
        # Models served from files a load request carried: name -> the folder written for them.
        self._written: dict[str, Path] = {}
        # Poll mode: the fingerprints are taken before the models load, so a change made
        # while they load is picked up by the first scans.
        self._watch = (
            RepositoryWatch(repository.root) if self.model_control is ModelControl.POLL else None
        )
        if self.model_control is ModelControl.EXPLICIT:
            names = list(startup_models or [])
            if "*" in names:  # Triton's --load-model=*: every model of the repository
                names = [n for n in names if n != "*"] + repository.model_names()
        else:
            names = repository.model_names()
        for warning in repository_warnings(repository.root):
            log.warning("%s", warning)
        for name in names:
            if name in self._states:
                continue  # loaded already, as a step of an ensemble loaded before it
            try:
                self._load(name, starting=True)
            except ModelNotFound as exc:
                log.error("model %r not loaded: %s", name, exc.message)

    @classmethod
    def from_repository(
        cls,
        path: str | Path | None = None,
        *,
        model_control: ModelControl | str = ModelControl.NONE,
        startup_models: Iterable[str] | None = None,
        gpu_instances_on_cpu: bool = False,
    ) -> Engine:
        """An engine over the repository at ``path``; None: the built-in example models.

        ``gpu_instances_on_cpu``: config.pbtxt's KIND_GPU instance groups run on the CPU
        (warned) instead of failing their model."""
        if path is None:
            from conveyor.examples import example_repository

            path = example_repository()
        return cls(
            Repository(path, gpu_on_cpu=gpu_instances_on_cpu),
            model_control=model_control,
            startup_models=startup_models,
        )

    # -- inference --------------------------------------------------------------------------

    def submit(
        self,
        model: str,
        inputs: Mapping[str, np.ndarray],
        *,
        version: int | str | None = None,
        outputs: Sequence[str] | None = None,
        priority: int = 0,
        timeout: float | None = None,
        request_id: str | None = None,
        sequence: SequenceInfo | None = None,
        parameters: Mapping[str, object] | None = None,
    ) -> InferFuture:
        """Queue one request and return its future at once; the compute runs elsewhere.

        The arguments are :class:`~conveyor.protocol.request.InferenceRequest`'s:
        ``sequence``: the sequence the request belongs to, for a model with
        sequence_batching (see docs/sequences.md); ``parameters``: the request's own
        parameters, handed to the model (a Triton model's ``request.parameters()``).

        Raises ModelNotFound, ModelNotReady, InvalidInput, QueueFull or ShuttingDown.
        """
        return self.submit_request(
            InferenceRequest(
                model, inputs, version, outputs, request_id, priority, timeout, sequence, parameters
            )
        )

    def submit_request(
        self,
        request: InferenceRequest,
        *,
        timeline: RequestTimeline | None = None,
        destinations: Destinations | None = None,
    ) -> InferFuture:
        """:meth:`submit` for a request already built (what the front ends decode).

        ``timeline``: stamped with the request's queue and compute times (tracing; an
        ensemble's steps each get one of their own). ``destinations``: output name -> a
        writable uint8 array where the caller wants that output (a shared-memory region); a
        backend that can may compute the output right there when the request runs alone
        (its result is then a view of the destination). Other outputs come back as usual.
        """
        if self._closing:
            raise ShuttingDown("the engine is shutting down; it takes no new requests")
        served = self._version(request.model, request.version)
        try:
            return self._submit_to(served, request, timeline, destinations)
        except ShuttingDown:
            # A reload swapped this version out between the lookup and the queueing (its
            # queue closed); the model is still served: queue on what serves it now.
            if self._closing:
                raise
            current = self._version(request.model, request.version)
            if current is served:
                raise
            return self._submit_to(current, request, timeline, destinations)

    @staticmethod
    def _submit_to(
        served: ServedVersion,
        request: InferenceRequest,
        timeline: RequestTimeline | None,
        destinations: Destinations | None,
    ) -> InferFuture:
        if isinstance(served, EnsembleVersion):
            if request.sequence is not None:
                raise InvalidInput(
                    f"ensemble {request.model!r} takes no sequence_id: sequences go to the "
                    "stateful model itself"
                )
            return served.submit(request, timeline=timeline)
        return served.submit(request, timeline=timeline, destinations=destinations)

    def stream(
        self,
        model: str,
        inputs: Mapping[str, np.ndarray],
        *,
        version: int | str | None = None,
        outputs: Sequence[str] | None = None,
        priority: int = 0,
        timeout: float | None = None,
        request_id: str | None = None,
        buffer: int = DEFAULT_BUFFER,
        sequence: SequenceInfo | None = None,
        parameters: Mapping[str, object] | None = None,
    ) -> ResponseStream:
        """Queue one request and return at once the stream of its responses.

        A decoupled model's responses arrive as it produces them (at most ``buffer`` wait
        for the reader; past that the model waits); any other model's one answer is the
        stream's only response. The other arguments are ``submit``'s; closing the stream
        cancels the request (see :mod:`conveyor.streams`).
        """
        return self.stream_request(
            InferenceRequest(
                model, inputs, version, outputs, request_id, priority, timeout, sequence, parameters
            ),
            buffer=buffer,
        )

    def stream_request(
        self,
        request: InferenceRequest,
        *,
        buffer: int = DEFAULT_BUFFER,
        timeline: RequestTimeline | None = None,
    ) -> ResponseStream:
        """:meth:`stream` for a request already built. ``timeline``: as
        :meth:`submit_request`'s, plus when each response of a decoupled model came."""
        if self._closing:
            raise ShuttingDown("the engine is shutting down; it takes no new requests")
        served = self._version(request.model, request.version)
        if request.sequence is not None and isinstance(served, EnsembleVersion):
            raise InvalidInput(
                f"ensemble {request.model!r} takes no sequence_id: sequences go to the "
                "stateful model itself"
            )
        while True:
            try:
                return start_stream(served, request, buffer=buffer, timeline=timeline)
            except ShuttingDown:
                # As in submit: a reload swapped the version out before the request was
                # queued; queue it on the version serving now.
                current = None if self._closing else self._version(request.model, request.version)
                if current is None or current is served:
                    raise
                served = current

    async def infer(self, model: str, inputs: Mapping[str, np.ndarray], **kwargs: Any) -> Outputs:
        """``submit`` and await the result; no thread waits meanwhile."""
        return await self.submit(model, inputs, **kwargs)

    def _version(self, model: str, version: int | str | None) -> ServedVersion:
        if version is None or version == "":
            running = self._latest.get(model)
            if running is not None:
                return running
            raise self._missing(model)
        number = version_number(version)
        versions = self._running.get(model)
        found = None if versions is None else versions.get(number)
        if found is None:
            self._check_not_failed(model, number)
        if versions is None:
            raise self._missing(model)
        if found is None:
            raise ModelNotFound(
                f"{UNKNOWN_MODEL}'{model}' version {number} is not found: model {model!r} has "
                f"no version {number}; loaded versions are "
                f"{', '.join(map(str, sorted(versions)))}"
            )
        return found

    def _check_not_failed(self, model: str, number: int) -> None:
        """Version ``number`` of ``model`` failed to load: Triton answers UNAVAILABLE with
        its words (the version is known, not at ready state); ours follow, with why."""
        status = self._states.get(model)
        why = None if status is None else status.failed.get(number)
        if why is not None:
            raise ModelNotReady(
                f"{UNKNOWN_MODEL}'{model}' version {number} is not at ready state: model "
                f"{model!r} version {number} failed to load: {why or 'no reason given'}"
            )

    def _missing(self, model: str) -> ConveyorError:
        # Each message starts with Triton's wording (its clients and their tests match on
        # it) and goes on with ours, which says why.
        unavailable = f"{UNKNOWN_MODEL}'{model}' has no available versions: "
        status = self._states.get(model)
        if status is not None:
            reason = f": {status.reason}" if status.reason else ""
            if status.state is ModelState.UNAVAILABLE and model in self._wanted:
                return ModelUnavailable(
                    f"{unavailable}model {model!r} is not ready: it failed to load: "
                    f"{status.reason or 'no reason given'}"
                )
            return ModelNotReady(
                f"{unavailable}model {model!r} is not ready ({status.state}){reason}"
            )
        if model in self.repository.model_names():
            return ModelNotReady(f"{unavailable}model {model!r} is not ready: not loaded")
        return ModelNotFound(
            f"{UNKNOWN_MODEL}'{model}' is not found: model {model!r} is not in the repository"
        )

    # -- models -----------------------------------------------------------------------------

    def model(self, name: str, version: int | str | None = None) -> ModelInfo:
        running = self._version(name, version)
        return ModelInfo(
            name=running.name,
            version=running.version,
            config=running.config,
            platform=running.platform,
            ready=not self._closing and running.ready,
        )

    def nesting(self, name: str, version: int | str | None = None) -> int:
        """How deep ensembles nest in the served model ``name``: 0 for a model, 1 for an
        ensemble of models, 2 for one with an ensemble among its steps, …"""
        running = self._version(name, version)
        return running.nesting if isinstance(running, EnsembleVersion) else 0

    def model_names(self) -> list[str]:
        return sorted(self._latest)

    def model_versions(self, name: str) -> list[int]:
        return sorted(self._running.get(name, {}))

    def repository_index(self) -> list[RepositoryEntry]:
        """Every model of the repository: one entry per loaded version, as V2 lists them
        (version "" for a model with no version loaded)."""
        statuses = {
            name: _Status(ModelState.UNAVAILABLE, reason="not loaded")
            for name in self.repository.model_names()
        }
        with self._lock:
            statuses.update(self._states)
            running = self._running
        entries = []
        for name, status in sorted(statuses.items()):
            if not status.versions:
                entries.append(RepositoryEntry(name, "", status.state, status.reason))
            for version in status.versions:
                entries.append(self._live_entry(name, version, status, running))
        return entries

    @staticmethod
    def _live_entry(
        name: str, version: int, status: _Status, running: dict[str, dict[int, ServedVersion]]
    ) -> RepositoryEntry:
        """A loaded version whose instances are all stuck past their execution timeout is
        listed UNAVAILABLE with why, until one of them returns."""
        loaded = running.get(name, {}).get(version)
        if status.state is ModelState.READY and loaded is not None and not loaded.ready:
            return RepositoryEntry(
                name, str(version), ModelState.UNAVAILABLE, loaded.unready_reason()
            )
        return RepositoryEntry(name, str(version), status.state, status.reason)

    def load_model(
        self, name: str, config: str | None = None, files: Mapping[str, bytes] | None = None
    ) -> None:
        """Load (or reload) a model from the repository; blocks until it is ready.

        ``config``: the model configuration as JSON (Triton's form), used for this load
        instead of the folder's config file; ``files`` (relative path -> content, with a
        ``config`` only): the model's folder, used instead of the repository's. A later load
        without them reads the repository again.

        A reload that fails leaves the versions that were serving in place (and raises)."""
        self._require_model_control()
        if files and config is None:
            raise InvalidInput(f"model {name!r}: files to load need a config beside them")
        folder = None
        try:
            folder = write_model_folder(name, files) if files else None
            override = SourceOverride(config, folder) if config is not None else None
            failure = self._load(name, override)
        except ModelNotFound as exc:
            if folder is not None:
                remove_written(folder)
            # Triton's wording for a model its repository does not hold, then ours.
            raise ModelNotFound(
                f"failed to load '{name}', failed to poll from model repository: {exc.message}"
            ) from None
        if failure is not None:
            if folder is not None:
                remove_written(folder)
            raise ModelLoadFailed(
                f"load failed for model '{name}': model {name!r} failed to load: {failure}"
            )
        with self._lock:
            previous = self._written.pop(name, None)
            if folder is not None:
                self._written[name] = folder
        if previous is not None:
            remove_written(previous)  # its versions were loaded from it and are replaced

    def unload_model(self, name: str) -> None:
        """Stop taking requests for ``name``, finish the ones it holds, then release it."""
        self._require_model_control()
        if name not in self._states and name not in self.repository.model_names():
            raise ModelNotFound(f"model {name!r} is not in the repository")
        with self._lock:
            self._wanted.discard(name)
            written = self._written.pop(name, None)
        self._stop(name, "unloaded")
        if written is not None:
            remove_written(written)  # files the versions no longer need: they are loaded

    def poll_repository(self) -> list[str]:
        """Poll mode: scan the repository once and act on the models whose folder changed
        and has settled (see conveyor.repository.watch): a new one loads, a changed one
        reloads (the old versions serve until the new ones are ready, and keep serving if
        they fail), a removed one unloads once its requests are answered. Blocks while it
        loads: call it from a thread of its own (conveyor.engine.polling). Returns the
        names acted on."""
        if self._watch is None:
            raise Unsupported("poll_repository needs model_control='poll'")
        changed = [] if self._closing else self._watch.scan()
        for name in changed:
            if self._closing:
                break
            try:
                failure = self._load(name)
            except ModelNotFound:
                log.info("model %r removed from the repository: unloaded", name)
                continue
            if failure is not None and name in self._running:
                log.error("model %r: reload failed, still serving the versions loaded before: "
                          "%s", name, failure)  # fmt: skip
        return changed

    def _require_model_control(self) -> None:
        if self.model_control is ModelControl.POLL:
            # Triton's wording and status (UNAVAILABLE), then ours.
            raise Unavailable(
                f"{POLLING_REFUSAL}: this server polls its repository (--model-control poll); "
                "add, change or remove the model's folder instead"
            )
        if self.model_control is not ModelControl.EXPLICIT:
            raise Unsupported(
                "model control is disabled; start the server with --model-control explicit "
                "to load and unload models"
            )

    def _load(
        self,
        name: str,
        override: SourceOverride | None = None,
        *,
        nested: bool = False,
        starting: bool = False,
    ) -> str | None:
        """Load ``name``'s versions; None, or why no version loaded. ``nested``: loaded as
        a step of an ensemble, whose load already loaded every model it nests; ``starting``:
        by the first load of the repository, which tries each model once.

        A model that is serving keeps serving while the new versions load next to it; they
        replace it in one step, then the old ones finish the requests they hold and are
        released. If none of the new versions loads, the old ones stay (the reason is in the
        repository index). ModelNotFound: the repository holds no such model (any more)."""
        try:
            source = self.repository.source(name, override)
        except ModelNotFound:
            # Nothing to remember about a name the repository does not hold (any more).
            self._stop(name, "removed from the repository")
            with self._lock:
                self._states.pop(name, None)
                self._wanted.discard(name)
            raise
        except ConveyorError as exc:
            log.error("model %r not loaded: %s", name, exc.message)
            self._failed(name, exc.message)
            return exc.message
        with self._lock:
            self._wanted.add(name)
            if name not in self._running:
                self._states[name] = _Status(ModelState.LOADING)
        for warning in (*source.warnings, *model_warnings(name, source.path, source.config)):
            log.warning("%s", warning)
        if source.config.backend == ENSEMBLE and not nested:
            self._load_step_models(source, starting)
        loaded: dict[int, ServedVersion] = {}
        failed: dict[int, str] = {}
        reason = ""
        for version in source.versions:
            running, failure = _load_version(source, version, self.submit_request, self)
            if running is not None:
                loaded[version] = running
            else:
                failed[version] = failure
            reason = failure or reason
        for version in source.fallbacks if not loaded else ():
            # The latest failed: serve the newest older version that loads, and say so.
            running, failure = _load_version(source, version, self.submit_request, self)
            if running is not None:
                loaded[version] = running
                latest = source.versions[-1]
                reason = f"version {latest} failed to load ({reason}); serving {version}"
                log.warning("model %r: %s", name, reason)
                break
            failed[version] = failure
        if not loaded:
            self._failed(name, reason, failed)
            return reason
        with self._lock:
            old = self._running.get(name)
            self._running = {**self._running, name: loaded}
            self._latest = {**self._latest, name: loaded[max(loaded)]}
            versions = tuple(sorted(loaded))
            self._states[name] = _Status(ModelState.READY, versions, reason, failed)
        log.info("model %r version %s ready", name, ",".join(map(str, versions)))
        # New requests reach the new versions from here on; the old ones drain.
        for running in (old or {}).values():
            running.close()
        return None

    def _failed(self, name: str, reason: str, failed: Mapping[int, str] | None = None) -> None:
        """No version of ``name`` loaded: UNAVAILABLE with why, or, if versions loaded
        before serve it, those keep serving and the index says the reload failed.
        ``failed``: the versions that failed to load, with why."""
        failed = {} if failed is None else failed
        with self._lock:
            self._wanted.add(name)
            serving = self._running.get(name)
            if serving is None:
                self._states[name] = _Status(ModelState.UNAVAILABLE, reason=reason, failed=failed)
                return
            versions = tuple(sorted(serving))
            self._states[name] = _Status(
                ModelState.READY,
                versions,
                f"reload failed, still serving version {','.join(map(str, versions))}: {reason}",
                {number: why for number, why in failed.items() if number not in serving},
            )

    def _load_step_models(self, source: ModelSource, starting: bool) -> None:
        """An ensemble's step models load before it (those not running already), so the
        order in which a repository lists its models never matters. One that fails to load
        fails the ensemble, whose load error then names the step."""
        for model in self._nested_step_models(source, starting):
            # Not in the repository: the ensemble's own check names the step and model.
            with contextlib.suppress(ModelNotFound):
                self._load(model, nested=True)

    def _nested_step_models(self, source: ModelSource, starting: bool) -> list[str]:
        """The models ``source`` runs that are not running yet, and those that ensembles
        among them run, each after every model it runs (depth first, without recursion:
        however deep ensembles nest, loading them never deepens the stack; each ensemble
        then refuses a nesting past MAX_NESTING itself). An ensemble that contains itself
        is left out here and refused by its own check. ``starting``: models the first load
        of the repository tried already (loaded or not) are left out too; later loads try
        again a step model that failed, as it may have been fixed since."""
        order: list[str] = []
        seen = {source.name}
        steps = [iter(source.config.ensemble_steps)]
        ensembles: list[str] = []  # the ensemble whose steps each deeper iterator walks
        while steps:
            step = next(steps[-1], None)
            if step is None:
                steps.pop()
                if ensembles:
                    order.append(ensembles.pop())
                continue
            model = step.model
            if model in seen or model in self._latest or (starting and model in self._states):
                continue
            seen.add(model)
            try:
                inner = self.repository.source(model)
            except ConveyorError:
                order.append(model)  # its own load says why (or that it does not exist)
                continue
            if inner.config.backend == ENSEMBLE:
                steps.append(iter(inner.config.ensemble_steps))
                ensembles.append(model)
            else:
                order.append(model)
        return order

    def _stop(self, name: str, why: str) -> None:
        with self._lock:
            versions = self._running.get(name)
            if versions is None:
                self._states[name] = _Status(ModelState.UNAVAILABLE, reason=why)
                return
            self._running = {k: v for k, v in self._running.items() if k != name}
            self._latest = {k: v for k, v in self._latest.items() if k != name}
            self._states[name] = _Status(ModelState.UNLOADING)
        for running in versions.values():
            running.close()
        with self._lock:
            self._states[name] = _Status(ModelState.UNAVAILABLE, reason=why)

    # -- state ------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Taking requests, with no model still loading.

        A model that failed to load does not make the engine unready (the others serve);
        its reason is in ``repository_index()`` and its own readiness is false.
        """
        if self._closing:
            return False
        with self._lock:
            return all(status.state is not ModelState.LOADING for status in self._states.values())

    def failed_models(self) -> list[RepositoryEntry]:
        """The models this engine was asked to serve (at start, or by ``load_model``, and not
        unloaded since) that failed to load: no version of theirs is running."""
        with self._lock:
            return [
                RepositoryEntry(name, "", status.state, status.reason)
                for name, status in sorted(self._states.items())
                if name in self._wanted and status.state is ModelState.UNAVAILABLE
            ]

    def statistics(
        self, name: str | None = None, version: int | str | None = None
    ) -> list[ModelStatistics]:
        if name is None:
            running = [v for versions in self._running.values() for v in versions.values()]
        elif version is None or version == "":
            if name not in self._running:
                raise self._missing(name)
            running = list(self._running[name].values())
        else:
            running = [self._version(name, version)]
        return [v.statistics() for v in sorted(running, key=lambda v: (v.name, v.version))]

    def activity(self) -> list[ModelActivity]:
        """Every running model version's instances, workers and last failures."""
        running = [
            v
            for versions in self._running.values()
            for v in versions.values()
            if isinstance(v, ModelVersion)  # an ensemble runs no instances of its own
        ]
        return [v.activity() for v in sorted(running, key=lambda v: (v.name, v.version))]

    def close(self, timeout: float | None = None) -> None:
        """Take no new requests; finish every queued and running one; stop the threads."""
        with self._lock:
            running = [v for versions in self._running.values() for v in versions.values()]
        # Ensembles drain first: their requests in flight still submit steps to the models.
        for version in running:
            if isinstance(version, EnsembleVersion):
                version.close(timeout)
        self._closing = True
        for version in running:
            version.queue.close()
        for version in running:
            version.close(timeout)
        with self._lock:
            written, self._written = list(self._written.values()), {}
        for folder in written:
            remove_written(folder)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _load_version(
    source: ModelSource, version: int, caller: ModelCaller, models: StepModels
) -> tuple[ServedVersion | None, str]:
    """One version loaded, or None and why not (logged, with the model's traceback if any).

    ``caller`` (the engine's submit) lets the model's code call other models of this engine;
    ``models`` (the engine) runs an ensemble's steps.
    """
    try:
        source.check_version(version)
        running: ServedVersion
        if source.config.backend == ENSEMBLE:
            running = EnsembleVersion(source.config, version, models)
        else:
            running = ModelVersion(
                source.config, version, source.version_dir(version), caller=caller
            )
        try:
            running.warm_up()
        except BaseException:
            running.close()
            raise
        return running, ""
    except Exception as exc:
        if isinstance(exc, ConveyorError):
            reason, where = exc.message, exc.model_traceback
        else:
            reason, where = f"{exc}", "".join(traceback.format_exception(exc))
        # The reason goes to clients (repository index); the traceback only to this log.
        details = f"\n{where.rstrip()}" if where else ""
        log.error("model %r version %d not loaded: %s%s", source.name, version, reason, details)
        return None, reason


def version_number(version: int | str) -> int:
    """A requested version as its number; InvalidInput for one that is not an integer."""
    try:
        return int(version)
    except (TypeError, ValueError):
        # Triton's wording first (its clients match on it), then ours.
        raise InvalidInput(
            f"failed to get model version from specified version string '{version}' "
            f"(details: not an integer), version should be an integral value > 0: "
            f"model version must be an integer, got {version!r}"
        ) from None
