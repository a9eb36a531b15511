"""The one protocol-neutral data plane under every front end.

HTTP (``http/routes.py``) and gRPC (``grpc/servicer.py``) only translate their wire format
into these calls and map what they raise to a status (``http/errors.py``,
``grpc/errors.py``). Everything a front end could get wrong on its own is decided here,
once: whether the server is ready (models still loading, a model that failed to load,
draining), which version serves a request, which load parameters are refused. A protocol
feature (shared memory, sequences, ...) is one method here plus a thin translation in each
front end.

The ports open before the models load, so the data plane starts with no engine: until the
server hands it one, health answers "live, not ready" and everything else Unavailable.
Nothing here blocks the event loop: ``infer`` returns the engine's future at once, and
``load`` / ``unload`` run in the loop's executor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from conveyor.backends.base import Destinations
from conveyor.engine import statistics_json
from conveyor.errors import DeadlineExceeded, InvalidInput, ModelNotReady, Unavailable, Unsupported
from conveyor.futures import InferFuture, Outputs
from conveyor.protocol import metadata
from conveyor.protocol.model_load import parse_load_parameters
from conveyor.protocol.request import InferenceRequest, from_options
from conveyor.repository import triton_json
from conveyor.server import shared_memory as shm
from conveyor.server.access_log import AccessLog
from conveyor.server.classified import ClassificationPlan, classified
from conveyor.server.generate import GenerateResponses, generate_inputs
from conveyor.server.log_settings import updated as updated_log_settings
from conveyor.server.tracing.extension import TraceExtension
from conveyor.server.tracing.trace import RequestTrace
from conveyor.server.tracing.tracer import Tracer

if TYPE_CHECKING:
    from conveyor.engine.engine import ModelInfo
    from conveyor.engine.interface import ServingEngine
    from conveyor.protocol.shared_memory import SharedMemoryUse
    from conveyor.repository.openai_spec import OpenAIEmbeddings
    from conveyor.server.log_output import LogControl
    from conveyor.server.metrics import LatencyHistograms
    from conveyor.streams import ResponseStream

log = logging.getLogger("conveyor.server")

STARTING = "the server is starting: models are still loading"
SYSTEM_SHARED_MEMORY = "system_shared_memory"
LOGGING = "logging"
TRACE = "trace"
NO_CUDA = (
    "CUDA shared memory is not supported on this server (no GPU); use system shared memory "
    "or send tensors in the request"
)


class DataPlane(TraceExtension):
    """Health, metadata, statistics, repository control and inference over one engine.

    ``strict_readiness`` (Triton's default): the server is ready only while every model it
    was asked to load is READY; relaxed, a model that failed to load leaves the server ready
    (its own readiness is false either way).
    """

    def __init__(
        self,
        engine: ServingEngine | None = None,
        *,
        version: str,
        strict_readiness: bool = True,
        extensions: tuple[str, ...] = metadata.EXTENSIONS,
        histograms: LatencyHistograms | None = None,
        shared_memory: shm.SharedMemoryRegistry | None = None,
        shared_memory_off: str = "it was not enabled",
        log_control: LogControl | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        """``shared_memory``: the registry of system shared-memory regions, None when the
        extension is off (``shared_memory_off`` then says why, in the errors).
        ``log_control``: the server's logging, for the logging extension (None: an app that
        embeds the routes keeps its own logging, and the extension answers Unsupported).
        ``tracer``: the trace settings and sinks (Triton's trace extension; off unless
        configured)."""
        # The server starts with none and sets it once the models are loaded; an app that
        # embeds the routes passes its engine here.
        self.engine: ServingEngine | None = engine
        self.draining = False  # set by the server on SIGTERM
        self.strict_readiness = strict_readiness
        self.histograms = histograms
        self.shared_memory = shared_memory
        self._shared_memory_off = shared_memory_off
        if shared_memory is not None:
            extensions = (*extensions, SYSTEM_SHARED_MEMORY)
        self.log_control = log_control
        # The front ends' access-log switch: the log control's, so the extension can flip it.
        self.access_log = log_control.access if log_control is not None else AccessLog()
        if log_control is not None:
            extensions = (*extensions, LOGGING)
        self.tracer = tracer if tracer is not None else Tracer()
        extensions = (*extensions, TRACE)
        self._server_metadata = metadata.server_metadata(version, extensions)

    def _engine(self) -> ServingEngine:
        engine = self.engine
        if engine is None:
            raise Unavailable(STARTING)
        return engine

    # -- health -----------------------------------------------------------------------------

    def live(self) -> bool:
        """Live whenever it answers: while the models load and while draining, too (a
        liveness probe that failed then would restart a server that is fine)."""
        return True

    def not_ready_reason(self) -> str | None:
        """None when the server is ready (V2 health/ready); otherwise why not."""
        engine = self.engine
        if engine is None:
            return "models are still loading"
        if self.draining:
            return "the server is shutting down"
        if not engine.ready:
            return "a model is still loading"
        if self.strict_readiness:
            failed = engine.failed_models()
            if failed:
                names = ", ".join(f"{e.name!r} ({e.reason or 'no reason given'})" for e in failed)
                return f"a model failed to load: {names}"
        return None

    def model_not_ready_reason(self, name: str, version: str | None) -> str | None:
        """None when the model (version) is ready; otherwise why not.

        Raises ModelNotFound for a model the repository does not hold, InvalidInput for a
        malformed version, Unavailable while the server starts.
        """
        try:
            info = self._model(name, version)
        except ModelNotReady as exc:
            return exc.message
        if self.draining or not info.ready:
            return f"model {name!r} is not ready"
        return None

    # -- metadata ---------------------------------------------------------------------------

    def server_metadata(self) -> dict[str, Any]:
        return self._server_metadata

    def model_metadata(self, name: str, version: str | None) -> dict[str, Any]:
        info = self._model(name, version)
        versions = self._engine().model_versions(info.name)
        return triton_json.model_metadata(info.config, info.platform, versions)

    def model_config(self, name: str, version: str | None) -> dict[str, Any]:
        info = self._model(name, version)
        return triton_json.model_config(info.config, info.platform, info.config.instance_count())

    def statistics(self, name: str | None, version: str | None) -> dict[str, Any]:
        """Every model's statistics (``name`` None), or one model's (all its versions, or one)."""
        return statistics_json.statistics(self._engine().statistics(name or None, version or None))

    def _model(self, name: str, version: str | None) -> ModelInfo:
        if not name:
            raise InvalidInput("the model name is empty; name a model")
        return self._engine().model(name, version or None)

    # -- OpenAI embeddings (conveyor/server/openai.py translates; infer runs them) ------------

    def openai_embeddings(self, name: str) -> OpenAIEmbeddings | None:
        """``name``'s ``[openai]`` table (its ready, newest version); None when it has none.
        Raises as ``infer`` would for a model that is not there."""
        return self._model(name, None).config.openai

    def openai_models(self) -> list[str]:
        """The ready models that serve OpenAI's embeddings API, by name."""
        engine = self._engine()
        names = {e.name for e in engine.repository_index() if e.state == "READY"}
        return sorted(name for name in names if engine.model(name, None).config.openai)

    # -- model repository -------------------------------------------------------------------

    def repository_index(self, ready_only: bool) -> list[dict[str, Any]]:
        return [
            metadata.repository_entry(e.name, e.version, e.state, e.reason)
            for e in self._engine().repository_index()
            if not ready_only or e.state == "READY"
        ]

    async def load(self, name: str, parameters: Mapping[str, object] | None = None) -> None:
        """Load (or reload) ``name``; ModelLoadFailed (a client error) if it fails to load.

        ``parameters``: the request's, by name (values as the front end read them: JSON
        values over HTTP, the parameter's oneof value over gRPC). A ``config`` (JSON) and
        ``file:<path>`` contents are used for this load instead of the repository's
        (conveyor.protocol.model_load); others are ignored.
        """
        override = parse_load_parameters(name, parameters or {})
        engine = self._engine()
        log.debug("loading model %r at a client's request", name)
        model = _required_name(name)

        def load() -> None:
            if override is None:
                engine.load_model(model)  # the engine's facades need take no override
            else:
                engine.load_model(model, config=override.config, files=override.files)

        # Loading blocks for a long time (files, sessions): never on the event loop.
        await asyncio.get_running_loop().run_in_executor(None, load)

    async def unload(self, name: str) -> None:
        """Stop serving ``name`` once the requests it holds are answered."""
        engine = self._engine()
        await asyncio.get_running_loop().run_in_executor(
            None, engine.unload_model, _required_name(name)
        )

    # -- shared memory ----------------------------------------------------------------------

    def _regions(self) -> shm.SharedMemoryRegistry:
        registry = self.shared_memory
        if registry is None:
            raise Unsupported(f"shared memory is off on this server: {self._shared_memory_off}")
        return registry

    def register_system_shared_memory(
        self, name: str, key: str, offset: int, byte_size: int
    ) -> None:
        self._regions().register(name, key, offset, byte_size)

    def unregister_system_shared_memory(self, name: str | None) -> None:
        """Unregister region ``name`` (None or empty: every region)."""
        self._regions().unregister(name or None)

    def system_shared_memory_status(self, name: str | None) -> list[dict[str, Any]]:
        """Triton's status entries: every region (``name`` None or empty), or one."""
        return self._regions().status(name or None)

    # CUDA shared memory: no region can ever be registered (no GPU), so the other calls
    # answer as Triton built without GPUs does. Clients (Triton's own examples among them)
    # clear every CUDA region before they use system shared memory, and must not fail.

    def cuda_shared_memory_status(self, name: str | None) -> list[dict[str, Any]]:
        """No regions; a region asked for by name is not registered."""
        if name:
            raise InvalidInput(
                f"Unable to find cuda shared memory region: '{name}' "
                "(this server has no GPU, so no CUDA region is ever registered)"
            )
        return []

    def unregister_cuda_shared_memory(self, name: str | None) -> None:
        """Nothing to unregister: succeeds, as Triton answers an unknown region."""
        self._regions()  # refused, as for system regions, while shared memory is off

    def register_cuda_shared_memory(self, name: str) -> NoReturn:
        raise Unsupported(
            f"failed to register CUDA shared memory region: '{name}', GPUs not supported: "
            + NO_CUDA
        )

    def close(self) -> None:
        """At shutdown, after the engine: release every shared-memory region."""
        if self.shared_memory is not None:
            self.shared_memory.close()
        self.tracer.close()  # the trace file's last traces, the spans still batched

    # -- logging extension ------------------------------------------------------------------

    def log_settings(self) -> dict[str, Any]:
        """Triton's log settings (name -> value) as the server applies them now."""
        return self._logging().settings.as_dict()

    def update_log_settings(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Apply ``changes`` (setting name -> value; None: back to the start value) all at
        once, or none of them (InvalidInput / Unsupported naming the setting); returns
        every setting as it is now."""
        control = self._logging()
        settings = updated_log_settings(control.settings, changes, control.started_with)
        control.apply(settings)
        log.debug("log settings changed: %s", settings.as_dict())
        return settings.as_dict()

    def _logging(self) -> LogControl:
        if self.log_control is None:
            raise Unsupported("the logging extension is off: this server does not own its logging")
        return self.log_control

    # -- inference --------------------------------------------------------------------------

    def infer(
        self,
        request: InferenceRequest,
        *,
        classifications: Mapping[str, int] | None = None,
        wait_limit: float | None = None,
        shared_memory: SharedMemoryUse | None = None,
        trace: RequestTrace | None = None,
    ) -> InferFuture:
        """Submit one request; return its future at once (``future.model_version`` names
        the version serving it). Raises for a request the engine refuses.

        ``classifications``: requested outputs to answer as their top-k classes (Triton's
        classification extension), output name -> k; see ``classified.py``.

        ``wait_limit``: seconds the caller will still wait for the answer (a gRPC deadline);
        the request's own timeout never runs past it. ``shared_memory``: inputs to read from,
        and outputs to write into, registered regions (the future completes once the outputs
        are written; its results still hold them, for the response's shapes). ``trace``: the
        request's trace, from :meth:`begin_trace`, stamped by the engine.
        """
        if trace is not None and not trace.decoded:
            trace.decoded = time.perf_counter_ns()  # REQUEST_START: decoded, now submitted
        if wait_limit is not None:
            # Past the caller's deadline nobody reads the answer: do not run it then.
            if wait_limit <= 0:
                raise DeadlineExceeded("the request's deadline passed before it was queued")
            if request.timeout is None or wait_limit < request.timeout:
                request = request._replace(timeout=wait_limit)
        if shared_memory:
            return self._infer_in_regions(shared_memory, request, classifications, trace)
        return self._submit(request, classifications, trace)

    def _submit(
        self,
        request: InferenceRequest,
        classifications: Mapping[str, int] | None,
        trace: RequestTrace | None,
        destinations: Destinations | None = None,
    ) -> InferFuture:
        """:meth:`infer` with every tensor in hand; ``destinations``: room in regions where
        the model may write outputs itself (see ``_infer_in_regions``)."""
        engine = self.engine
        if engine is None:
            raise Unavailable(STARTING)
        plan = None
        if classifications:
            config = engine.model(request.model, request.version).config
            plan = ClassificationPlan(config, classifications)
        future = engine.submit_request(
            request,
            timeline=None if trace is None else trace.timeline,
            destinations=destinations,
        )
        return future if plan is None else classified(future, plan)

    def is_decoupled(self, model: str, version: str | None) -> bool:
        """True for a model that answers a request with any number of responses (stream it).

        Raises as ``infer`` would for a model it cannot serve."""
        return self._model(model, version).config.decoupled

    def stream(
        self, request: InferenceRequest, *, trace: RequestTrace | None = None
    ) -> ResponseStream:
        """Submit one request; return at once the stream its responses arrive on (one for
        a model that is not decoupled). The front end closes it when its client goes away.

        ``trace``: a sampled request's; the engine stamps it (each response of a decoupled
        model too) and the front end ends it with ``Tracer.end_stream``. An engine in
        another process (``--workers``) is not traced."""
        if trace is not None and not trace.decoded:
            trace.decoded = time.perf_counter_ns()  # REQUEST_START: decoded, now submitted
        return self._engine().stream_request(
            request, timeline=None if trace is None else trace.timeline
        )

    def generate(
        self,
        model: str,
        version: str | None,
        request: Mapping[str, Any],
        *,
        trace: RequestTrace | None = None,
    ) -> GenerateResponses:
        """Triton's generate extension: a flat JSON request streamed to the model; its
        responses as flat JSON objects (see ``generate.py``). ``trace``: as
        :meth:`stream`'s; it ends with the responses."""
        config = self._model(model, version).config
        inputs, options = generate_inputs(config, request)
        stream = self.stream(from_options(model, version, inputs, None, None, options), trace=trace)
        if trace is None:
            return GenerateResponses(stream, model)
        return GenerateResponses(
            stream, model, lambda ok: self.tracer.end_stream(trace, stream.model_version, "", ok)
        )

    def _infer_in_regions(
        self,
        use: SharedMemoryUse,
        request: InferenceRequest,
        classifications: Mapping[str, int] | None,
        trace: RequestTrace | None,
    ) -> InferFuture:
        """:meth:`infer` with tensors in shared memory: regions held from here until the
        outputs are written, inputs as read-only views of them (no copy).

        Each output's place in its region goes to the engine as a destination: a backend
        that computes the output right there (onnxruntime, for a request that runs alone)
        returns a view of it, and nothing is copied after; any other output is copied in.
        """
        names = {t.location.region for t in use.inputs.values()}
        names.update(located.region for located in use.outputs.values())
        lease = self._regions().lease(names, "infer")
        try:
            resolved = dict(request.inputs)
            for name, tensor in use.inputs.items():
                resolved[name] = shm.read_input(lease, name, tensor, request.model)
            request = request._replace(inputs=resolved)
            # A classified output is written as its classes, never as the model made it.
            classes = classifications or {}
            destinations = {
                name: shm.output_destination(lease, name, located)
                for name, located in use.outputs.items()
                if name not in classes
            }
            inner = self._submit(request, classifications, trace, destinations)
        except BaseException:
            lease.release()
            raise
        outer = InferFuture()
        # ``dropped`` reaches the engine's future through this list, emptied once it is done:
        # held directly, outer -> dropped -> inner -> written -> outer would be a cycle that
        # keeps the results (views of the regions) alive until the garbage collector runs,
        # and an unregistered region mapped until then.
        running = [inner]
        outer.request_id = inner.request_id
        outer.model_name = inner.model_name
        outer.model_version = inner.model_version

        def written(done: concurrent.futures.Future[Outputs]) -> None:
            # On the engine thread that completed the request, never the event loop.
            try:
                if done.cancelled():
                    outer.cancel()
                    return
                error = done.exception()
                if error is not None:
                    outer.set_exception(error)
                    return
                results = done.result()
                for name, located in use.outputs.items():
                    array = results.get(name)
                    if array is None:
                        continue
                    destination = destinations.get(name)
                    if destination is None or not shm.already_written(array, destination):
                        shm.write_output(lease, name, array, located)
                outer.set_result(results)
            except Exception as exc:
                if not outer.done():
                    outer.set_exception(exc)
            finally:
                # The futures keep their callbacks (this closure) after they are done: the
                # views must go now, or the regions they map could never be unmapped.
                destinations.clear()
                running.clear()
                lease.release()

        def dropped(done: concurrent.futures.Future[Outputs]) -> None:
            if done.cancelled() and running:
                running[0].cancel()  # the caller cancelled: drop the request if still queued

        outer.add_done_callback(dropped)
        inner.add_done_callback(written)
        return outer

    def observe_latency(self, future: InferFuture, seconds: float, protocol: str) -> None:
        """Record an answered request's latency (request read -> response built)."""
        if self.histograms is not None and future.model_name is not None:
            self.histograms.observe(
                future.model_name, future.model_version or "", seconds, protocol
            )


def _required_name(name: str) -> str:
    if not name:
        raise InvalidInput("model_name is empty; name the model to load or unload")
    return name
