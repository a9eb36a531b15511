"""The ``inference.GRPCInferenceService`` methods: parse, call the engine, answer. Nothing else.

Every method runs on the server's asyncio loop and never blocks it: inference is
``engine.submit`` (returns at once) and ``await future``; loading and unloading models run in
the loop's executor. Errors are ConveyorErrors up to :func:`status_code`, the one place a
kind becomes a gRPC status.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from conveyor import __version__
from conveyor.engine import Engine
from conveyor.errors import (
    Cancelled,
    ConveyorError,
    DeadlineExceeded,
    ErrorKind,
    InvalidInput,
    Unavailable,
)
from conveyor.futures import InferFuture
from conveyor.protocol import metadata
from conveyor.protocol.grpc import converters, wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc._generated import model_config_pb2
from conveyor.server.grpc.service import unparseable

if TYPE_CHECKING:
    from conveyor.server.metrics import LatencyHistograms

log = logging.getLogger("conveyor.server.grpc")

Context = grpc.aio.ServicerContext
R = TypeVar("R", bound=Message)

# Put on an open stream's answer queue when the server starts draining.
_DRAIN = object()

_STATUS = {
    ErrorKind.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    ErrorKind.CANCELLED: grpc.StatusCode.CANCELLED,
    ErrorKind.INTERNAL: grpc.StatusCode.INTERNAL,
    ErrorKind.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    ErrorKind.UNIMPLEMENTED: grpc.StatusCode.UNIMPLEMENTED,
    ErrorKind.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
}


def status_code(kind: ErrorKind) -> grpc.StatusCode:
    """The gRPC status for an error kind (queue full and shutting down are UNAVAILABLE)."""
    return _STATUS[kind]


def _unexpected(exc: BaseException, what: str) -> ConveyorError:
    """A bug, not a bad request: logged with its traceback, answered INTERNAL."""
    log.error("gRPC %s failed unexpectedly", what, exc_info=exc)
    return ConveyorError(f"{what} failed: {type(exc).__name__}: {exc}")


class InferenceServicer:
    """The service's methods over one engine; see :meth:`implementations`."""

    def __init__(
        self,
        engine: Callable[[], Engine | None],
        *,
        histograms: LatencyHistograms | None = None,
    ) -> None:
        # The server starts its front ends before the models load: until then there is no
        # engine, and every call but the health checks answers UNAVAILABLE.
        self._get_engine = engine
        self._histograms = histograms
        self._clock = time.perf_counter
        # Each open ModelStreamInfer's answer queue, so a drain can end the idle ones.
        self._streams: set[asyncio.Queue[Any]] = set()
        self._draining = False

    def end_streams(self) -> None:
        """Draining: each open stream ends (OK) once it has answered what it was sent.

        Without this, a client that keeps an idle stream open would hold the server's
        shutdown for the whole drain timeout.
        """
        self._draining = True
        for answers in self._streams:
            answers.put_nowait(_DRAIN)

    @property
    def _engine(self) -> Engine:
        engine = self._get_engine()
        if engine is None:
            raise Unavailable("the server is starting: models are still loading")
        return engine

    def implementations(self) -> dict[str, Callable[..., Any]]:
        """Method name -> handler, for :func:`conveyor.server.grpc.service.generic_handler`."""
        names = (
            "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
            "ModelConfig", "ModelStatistics", "ModelInfer", "ModelStreamInfer",
            "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload",
        )  # fmt: skip
        handlers: dict[str, Callable[..., Any]] = {name: getattr(self, name) for name in names}
        for name in (
            "SystemSharedMemoryStatus", "SystemSharedMemoryRegister",
            "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus",
            "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister",
        ):  # fmt: skip
            handlers[name] = self._shared_memory
        return handlers

    # -- inference ------------------------------------------------------------------------

    def codecs(self) -> dict[str, tuple[Callable[[bytes], Any], Callable[[Any], bytes]]]:
        """How the inference methods read and write messages (see :mod:`.wire`)."""
        return {
            "ModelInfer": (_read_infer_request, _write_infer_response),
            "ModelStreamInfer": (
                _read_infer_request,
                pb.ModelStreamInferResponse.SerializeToString,
            ),
        }

    async def ModelInfer(self, received: Received | InvalidInput, context: Context) -> Any:
        started = self._clock()
        try:
            if isinstance(received, InvalidInput):
                raise received  # the message itself could not be parsed
            call = converters.infer_call(*received)
            future, version = self._submit(call, context)
            try:
                outputs = await future
            except asyncio.CancelledError:
                # The client went away (or its deadline passed): drop the request if queued.
                future.cancel()
                raise
            response = converters.infer_response_bytes(
                call.model, version, call.request_id, outputs
            )
            if self._histograms is not None:
                self._histograms.observe(call.model, version, self._clock() - started, "grpc")
            return response
        except ConveyorError as exc:
            await context.abort(status_code(exc.kind), _details(exc.message))
        except Exception as exc:
            error = _unexpected(exc, "ModelInfer")
            await context.abort(status_code(error.kind), _details(error.message))

    def _submit(self, call: converters.InferCall, context: Context) -> tuple[InferFuture, str]:
        timeout = call.options.timeout
        remaining = context.time_remaining()
        if remaining is not None:
            # The client's deadline bounds the request too: past it, nobody reads the answer.
            if remaining <= 0:
                raise DeadlineExceeded("the request's gRPC deadline passed before it was queued")
            timeout = remaining if timeout is None else min(timeout, remaining)
        version = str(self._engine.model(call.model, call.version).version)
        future = self._engine.submit(
            call.model,
            call.inputs,
            version=call.version,
            outputs=call.outputs,
            priority=call.options.priority,
            timeout=timeout,
            request_id=call.request_id or None,
        )
        return future, version

    async def ModelStreamInfer(
        self, requests: AsyncIterator[Received | InvalidInput], context: Context
    ) -> AsyncIterator[pb.ModelStreamInferResponse]:
        """Run every request of the stream at once; answer each the moment it completes.

        A request that fails is answered in-band (``error_message`` plus an
        ``infer_response`` carrying its id) and the stream goes on.
        """
        loop = asyncio.get_running_loop()
        # Answers, in the order their requests completed; None: the request stream ended;
        # _DRAIN: the server is draining, so end the stream once nothing is unanswered.
        answers: asyncio.Queue[pb.ModelStreamInferResponse | object | None] = asyncio.Queue()
        running: set[InferFuture] = set()  # submitted, not yet completed: cancelled on exit
        unanswered = 0  # requests read whose answer is not yet written

        def finished(future: InferFuture, call: converters.InferCall, version: str) -> None:
            running.discard(future)  # on the loop, in completion order
            answers.put_nowait(_stream_response(future, call, version))

        async def read() -> None:
            nonlocal unanswered
            try:
                async for received in requests:
                    unanswered += 1
                    if isinstance(received, InvalidInput):
                        answers.put_nowait(_stream_error("", "", "", received))
                        continue
                    request, raw = received
                    try:
                        call = converters.infer_call(request, raw)
                        future, version = self._submit(call, context)
                    except Exception as exc:
                        error = (
                            exc if isinstance(exc, ConveyorError) else _unexpected(exc, "stream")
                        )
                        answers.put_nowait(
                            _stream_error(
                                request.model_name, request.model_version, request.id, error
                            )
                        )
                        continue
                    running.add(future)

                    def on_done(
                        _: object,
                        f: InferFuture = future,  # defaults bind this iteration's values
                        c: converters.InferCall = call,
                        v: str = version,
                    ) -> None:
                        loop.call_soon_threadsafe(finished, f, c, v)

                    future.add_done_callback(on_done)
            finally:
                answers.put_nowait(None)

        reader = asyncio.create_task(read())
        reading = True
        self._streams.add(answers)
        if self._draining:
            answers.put_nowait(_DRAIN)
        try:
            while reading or unanswered:
                answer = await answers.get()
                if answer is _DRAIN:
                    reading = False  # requests already read are still answered
                    continue
                if answer is None:
                    reading = False
                    reader.result()  # re-raise what ended the request stream, if anything
                    continue
                unanswered -= 1
                assert isinstance(answer, pb.ModelStreamInferResponse)
                yield answer
        finally:
            self._streams.discard(answers)
            reader.cancel()
            for future in running:
                future.cancel()  # the client is gone: drop what is still queued

    # -- health and metadata --------------------------------------------------------------

    async def ServerLive(self, request: pb.ServerLiveRequest, context: Context) -> Any:
        engine = self._get_engine()  # live while the models load, too
        return pb.ServerLiveResponse(live=engine is None or engine.live)

    async def ServerReady(self, request: pb.ServerReadyRequest, context: Context) -> Any:
        engine = self._get_engine()
        return pb.ServerReadyResponse(ready=engine is not None and engine.ready)

    async def ModelReady(self, request: pb.ModelReadyRequest, context: Context) -> Any:
        try:
            ready = self._engine.model(request.name, request.version or None).ready
        except ConveyorError:
            ready = False  # starting, unknown or unloaded: not ready, as Triton answers
        return pb.ModelReadyResponse(ready=ready)

    async def ServerMetadata(self, request: pb.ServerMetadataRequest, context: Context) -> Any:
        return _parse(metadata.server_metadata(__version__), pb.ServerMetadataResponse)

    async def ModelMetadata(self, request: pb.ModelMetadataRequest, context: Context) -> Any:
        async def build() -> Any:
            info = self._model(request.name, request.version)
            versions = self._engine.model_versions(info.name)
            data = metadata.model_metadata(info.config, info.platform, versions)
            return _parse(data, pb.ModelMetadataResponse)

        return await _answer(context, "ModelMetadata", build())

    async def ModelConfig(self, request: pb.ModelConfigRequest, context: Context) -> Any:
        async def build() -> Any:
            info = self._model(request.name, request.version)
            data = metadata.model_config(info.config, info.platform, info.config.instance_count())
            return pb.ModelConfigResponse(config=_parse(data, model_config_pb2.ModelConfig))

        return await _answer(context, "ModelConfig", build())

    async def ModelStatistics(self, request: pb.ModelStatisticsRequest, context: Context) -> Any:
        async def build() -> Any:
            stats = self._engine.statistics(request.name or None, request.version or None)
            return _parse(metadata.statistics(stats), pb.ModelStatisticsResponse)

        return await _answer(context, "ModelStatistics", build())

    def _model(self, name: str, version: str) -> Any:
        if not name:
            raise InvalidInput("the model name is empty; name a model")
        return self._engine.model(name, version or None)

    # -- model repository ------------------------------------------------------------------

    async def RepositoryIndex(self, request: pb.RepositoryIndexRequest, context: Context) -> Any:
        async def build() -> Any:
            entries = [
                metadata.repository_entry(e.name, e.version, e.state, e.reason)
                for e in self._engine.repository_index()
                if not request.ready or e.state == "READY"
            ]
            return _parse({"models": entries}, pb.RepositoryIndexResponse)

        return await _answer(context, "RepositoryIndex", build())

    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, context: Context
    ) -> Any:
        async def load() -> Any:
            # Loading blocks (it reads files and builds sessions): keep it off the loop.
            await asyncio.get_running_loop().run_in_executor(
                None, self._engine.load_model, _required_name(request.model_name)
            )
            return pb.RepositoryModelLoadResponse()

        return await _answer(context, "RepositoryModelLoad", load())

    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, context: Context
    ) -> Any:
        async def unload() -> Any:
            await asyncio.get_running_loop().run_in_executor(
                None, self._engine.unload_model, _required_name(request.model_name)
            )
            return pb.RepositoryModelUnloadResponse()

        return await _answer(context, "RepositoryModelUnload", unload())

    async def _shared_memory(self, request: Message, context: Context) -> Any:
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED,
            "shared memory is not supported by this server yet; send tensors in raw_input_contents",
        )


async def _answer(context: Context, what: str, work: Awaitable[Any]) -> Any:
    """Await ``work``; turn a ConveyorError (or a bug) into the matching gRPC status."""
    try:
        return await work
    except ConveyorError as exc:
        await context.abort(status_code(exc.kind), _details(exc.message))
    except Exception as exc:
        error = _unexpected(exc, what)
        await context.abort(status_code(error.kind), _details(error.message))


Received = tuple[pb.ModelInferRequest, Sequence[bytes | memoryview]]


def _read_infer_request(data: bytes) -> Received | InvalidInput:
    # The raw tensors stay views into the received bytes (wire.split_raw): no copies.
    try:
        return wire.split_raw(data, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
    except DecodeError as exc:
        # Raised here, gRPC would answer UNKNOWN; the handler answers INVALID_ARGUMENT.
        return unparseable(pb.ModelInferRequest, exc)


# gRPC carries the status message in a trailer, and clients refuse trailers over 16 KiB
# (the call then fails RESOURCE_EXHAUSTED, hiding the real error): messages that quote a
# huge name from the request are cut short.
MAX_DETAILS = 4096


def _details(message: str) -> str:
    if len(message) <= MAX_DETAILS:
        return message
    # Keep both ends: the start names the field, the end usually says what was expected.
    half = MAX_DETAILS // 2
    return f"{message[:half]}...({len(message) - 2 * half} characters cut)...{message[-half:]}"


def _write_infer_response(response: bytes | Message) -> bytes:
    # ModelInfer answers pre-serialized bytes (converters.infer_response_bytes); an error
    # path may still hand over a message.
    return response if isinstance(response, bytes) else response.SerializeToString()


def _parse(data: dict[str, Any], message: type[R]) -> R:
    """A metadata dict (Triton's JSON form, from conveyor.protocol.metadata) as a message."""
    # Fields Conveyor's .proto leaves out (e.g. version_policy) are skipped, not errors.
    return json_format.ParseDict(data, message(), ignore_unknown_fields=True)


def _required_name(name: str) -> str:
    if not name:
        raise InvalidInput("model_name is empty; name the model to load or unload")
    return name


def _stream_response(
    future: InferFuture, call: converters.InferCall, version: str
) -> pb.ModelStreamInferResponse:
    if future.cancelled():
        error: BaseException | None = Cancelled("the request was cancelled")
    else:
        error = future.exception()
    if error is None:
        try:
            response = converters.infer_response(
                call.model, version, call.request_id, future.result()
            )
            return pb.ModelStreamInferResponse(infer_response=response)
        except Exception as exc:
            error = exc
    if not isinstance(error, ConveyorError):
        error = _unexpected(error, "a streamed request")
    return _stream_error(call.model, version, call.request_id, error)


def _stream_error(
    model: str, version: str, request_id: str, error: ConveyorError
) -> pb.ModelStreamInferResponse:
    """A failed request of a stream, answered in-band; the stream stays open.

    The id travels with the error so a client can tell which request failed, and the
    status the error would have had as a plain call rides in the ``error_code`` parameter
    (Triton's clients read only ``error_message``; Conveyor's maps the code to an error).
    """
    response = pb.ModelInferResponse(model_name=model, model_version=version, id=request_id)
    response.parameters["error_code"].string_param = status_code(error.kind).name
    return pb.ModelStreamInferResponse(
        error_message=_details(error.message), infer_response=response
    )
