"""The ``inference.GRPCInferenceService`` methods: translate messages to data-plane calls.

Each method parses its request, calls :class:`~conveyor.server.dataplane.DataPlane` and
builds the response; the data plane decides every answer, ``errors.py`` maps what it raises
to a status. Every method runs on the server's asyncio loop and never blocks it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from conveyor.errors import Cancelled, ConveyorError, ErrorKind, InvalidInput, UnaryToDecoupled
from conveyor.futures import InferFuture, Outputs
from conveyor.protocol.grpc import converters, decoupled, wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc._generated import model_config_pb2
from conveyor.server.grpc.errors import (
    Context,
    answering_errors,
    as_conveyor_error,
    details,
    status_code,
)
from conveyor.server.grpc.service import Codecs, Starts, unparseable
from conveyor.server.grpc.trace import trace_setting, traceparent
from conveyor.server.infer_life import InferLife
from conveyor.server.stream_send import DEFAULT_STREAM_SEND_TIMEOUT_S, stalled_message

if TYPE_CHECKING:
    from conveyor.server.dataplane import DataPlane

R = TypeVar("R", bound=Message)

log = logging.getLogger("conveyor.server.grpc")

# Put on an open stream's answer queue when the server starts draining.
_DRAIN = object()
# A decoupled request ended with no response to send for its end.
_ANSWERED = object()
# A response waited past the send timeout: the stream ends with an error.
_STALLED = object()


class _Partial:
    """One response of a decoupled request; ``written`` is set once it was sent."""

    __slots__ = ("payload", "written")

    def __init__(self, payload: bytes, written: asyncio.Event) -> None:
        self.payload = payload
        self.written = written


class _Progress:
    """When the transport last took one of a stream's answers, and whether it stalled."""

    __slots__ = ("at", "stalled")

    def __init__(self, at: float) -> None:
        self.at = at
        self.stalled = False


class InferenceServicer:
    """The service's methods over one data plane; see :meth:`implementations`."""

    def __init__(
        self, data: DataPlane, stream_send_timeout: float = DEFAULT_STREAM_SEND_TIMEOUT_S
    ) -> None:
        """``stream_send_timeout``: seconds a stream's response may wait for its client to
        read before the stream is ended (0: no limit; see ``conveyor.server.stream_send``)."""
        self.data = data
        self._send_timeout = stream_send_timeout
        self._clock = time.perf_counter
        self._access = data.access_log
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

    def implementations(self) -> dict[str, Callable[..., Any]]:
        """Method name -> handler, for :func:`conveyor.server.grpc.service.generic_handler`."""
        names = (
            "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
            "ModelConfig", "ModelStatistics", "ModelInfer", "ModelStreamInfer",
            "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload",
            "SystemSharedMemoryStatus", "SystemSharedMemoryRegister",
            "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus", "CudaSharedMemoryRegister",
            "CudaSharedMemoryUnregister", "LogSettings",
        )  # fmt: skip
        handlers: dict[str, Callable[..., Any]] = {name: getattr(self, name) for name in names}
        handlers["TraceSetting"] = self.TraceSetting
        return handlers

    # -- inference ------------------------------------------------------------------------

    def starts(self) -> Starts:
        """Unary methods a transport may drive by callbacks (see :meth:`start_infer`)."""
        return {"ModelInfer": self.start_infer}

    def codecs(self) -> Codecs:
        """How the inference methods read and write messages (see :mod:`.wire`)."""
        return {
            "ModelInfer": (_read_infer_request, _write_infer_response),
            "ModelStreamInfer": (_read_infer_request, _write_infer_response),
        }

    async def ModelInfer(self, received: Message_, context: Context) -> Any:
        # Not @answering_errors: the hot path keeps its one try block. The same steps as
        # :class:`_UnaryInfer` (the callback-driven form), with an await between them.
        started = self._clock()
        life = None
        call: converters.InferCall | None = None
        future: InferFuture | None = None
        try:
            if isinstance(received, InvalidInput):
                raise received  # the message itself could not be parsed
            if isinstance(received, LargeMessage):
                received, call = await received.decoded()
            life = self._life(received[0].model_name, context, started)
            if call is None:
                call = converters.infer_call(*received)
            future = self._submit(life, call, context)
            try:
                outputs = await future
            except asyncio.CancelledError:
                # The client went away (or its deadline passed): drop the request if queued.
                future.cancel()
                raise
            return self._infer_response(life, call, future, outputs, context, started)
        except Exception as exc:
            code, text = self._infer_failed(received, life, exc, started)
        # Aborted outside the handler, so the abort's error does not hold this one, and
        # holding nothing of the call: grpcio keeps the abort's traceback, and with it this
        # frame, in a cycle of its own.
        del received, life, call, future
        await context.abort(code, text)

    def start_infer(self, received: Message_, context: Context) -> _UnaryInfer | None:
        """ModelInfer up to the engine's future, with no coroutine: for a transport that
        answers from the future's callback (Conveyor's own HTTP/2 saves a task and an
        asyncio future per call). None: take :meth:`ModelInfer` (a large message is decoded
        off the loop). An error ends the call as ModelInfer's would: it raises
        ``grpc.aio.AbortError`` with the status set on ``context``."""
        if isinstance(received, LargeMessage):
            return None
        return _UnaryInfer(self, received, context)

    def _infer_response(
        self,
        life: InferLife,
        call: converters.InferCall,
        future: InferFuture,
        outputs: Outputs,
        context: Context,
        started: float,
    ) -> Any:
        response = converters.infer_response_parts(
            call.model,
            future.model_version or "",
            call.request_id,
            outputs,
            call.shared_memory.outputs,
        )
        life.answered(self._clock())
        if self._access.enabled:
            self._access.grpc(
                "ModelInfer", call.model, "OK", self._clock() - started, call.request_id
            )
        life.sent_when(getattr(context, "add_done_callback", None))
        return response

    def _infer_failed(
        self, received: Message_ | None, life: InferLife | None, exc: Exception, started: float
    ) -> tuple[grpc.StatusCode, str]:
        """The status a failed ModelInfer call ends with; its trace and access line."""
        if life is not None:
            life.failed()
        # Triton's words for a unary call to a decoupled model
        said = exc.said_by("ModelInfer RPC") if isinstance(exc, UnaryToDecoupled) else exc
        if self._access.enabled:
            self._access_failed(received, said, self._clock() - started)
        error = as_conveyor_error(said, "ModelInfer")
        # Its traceback's frames hold it (the caller's frame holds the future that holds
        # it, or the message that is it): a cycle only the collector would free. A bug's
        # traceback was logged just above; nothing reads it after.
        exc.__traceback__ = None
        return status_code(error.kind), details(error.message)

    def _life(
        self, model: str, context: Context, arrived: float, in_stream: bool = False
    ) -> InferLife:
        """The life of a request read at ``arrived``. A unary call's first byte is when its
        headers arrived where the transport tells (Conveyor's: the context's ``opened``;
        grpcio's context cannot, and the handler's start is the earliest it shows); a
        stream's request is traced from when it was read (``in_stream``)."""
        data = self.data
        if not data.tracer.on:  # the one check tracing costs while it is off
            return InferLife(data, "grpc", model, arrived)
        opened = arrived if in_stream else getattr(context, "opened", arrived)
        # perf_counter and perf_counter_ns: one clock
        return InferLife(data, "grpc", model, arrived, traceparent(context), int(opened * 1e9))

    def _access_failed(self, received: Message_ | None, exc: Exception, seconds: float) -> None:
        """The access line of a ModelInfer call that fails with ``exc``."""
        kind = exc.kind if isinstance(exc, ConveyorError) else ErrorKind.INTERNAL
        request = received[0] if isinstance(received, tuple) else None
        self._access.grpc(
            "ModelInfer",
            request.model_name if request is not None else None,
            status_code(kind).name,
            seconds,
            request.id if request is not None else None,
        )

    def _submit(self, life: InferLife, call: converters.InferCall, context: Context) -> InferFuture:
        # The client's deadline bounds the request.
        return life.submit(call, wait_limit=context.time_remaining())

    async def ModelStreamInfer(
        self, requests: AsyncIterator[Message_], context: Context
    ) -> AsyncIterator[bytes | list[Any] | pb.ModelStreamInferResponse]:
        """Run every request of the stream at once; answer each the moment it completes.

        A request that fails is answered in-band (``error_message`` plus an
        ``infer_response`` carrying its id) and the stream goes on.
        """
        loop = asyncio.get_running_loop()
        data = self.data
        # Answers, in the order their requests completed; None: the request stream ended;
        # _DRAIN: the server is draining, so end the stream once nothing is unanswered;
        # _STALLED: the client stopped reading, so end it with an error.
        answers: asyncio.Queue[bytes | pb.ModelStreamInferResponse | object | None] = (
            asyncio.Queue()
        )
        running: set[InferFuture] = set()  # submitted, not yet completed: cancelled on exit
        pumps: set[asyncio.Task[None]] = set()  # decoupled requests' responses: cancelled on exit
        unanswered = 0  # requests read whose answer is not yet written
        # The transport took an answer at this time (loop clock): a pump whose response
        # waits longer than the send timeout with no answer taken meanwhile ends the stream.
        sent = _Progress(loop.time())

        def stalled() -> None:
            """The client took nothing for the send timeout: end the call (the transport
            sends the status, or resets the stream, as it can) and with it every request."""
            if sent.stalled:
                return
            sent.stalled = True
            message = stalled_message(self._send_timeout)
            log.info("gRPC ModelStreamInfer ended: %s", message)
            abort_now = getattr(context, "abort_now", None)
            if abort_now is not None:
                # Conveyor's transport ends the call at once: its status, or a reset if a
                # message is half-written; the handler is cancelled out of its write.
                abort_now(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
            else:
                # grpcio cannot end a call while a write waits: the status follows that
                # write, once the client reads again (or goes with its connection).
                answers.put_nowait(_STALLED)

        def finished(future: InferFuture, call: converters.InferCall, life: InferLife) -> None:
            running.discard(future)  # on the loop, in completion order
            answers.put_nowait(_stream_response(future, call))
            ok = not future.cancelled() and future.exception() is None
            life.stream_ended(future.model_version, call.request_id, ok)

        async def read() -> None:
            nonlocal unanswered
            try:
                async for received in requests:
                    unanswered += 1
                    if isinstance(received, InvalidInput):
                        answers.put_nowait(_stream_error("", "", "", received))
                        continue
                    call = None
                    if isinstance(received, LargeMessage):
                        try:
                            received, call = await received.decoded()
                        except Exception as exc:
                            error = as_conveyor_error(exc, "stream")
                            answers.put_nowait(_stream_error("", "", "", error))
                            continue
                    request, raw = received
                    # Each request of the stream is traced on its own.
                    life = self._life(request.model_name, context, self._clock(), in_stream=True)
                    try:
                        if call is None:
                            call = converters.infer_call(request, raw)
                        if data.is_decoupled(call.model, call.version):
                            flagged = decoupled.wants_final_flag(request)
                            pump = self._stream_responses(
                                call, flagged, answers, life, sent, stalled
                            )
                            pumps.add(asyncio.create_task(pump))
                            continue
                        future = self._submit(life, call, context)
                    except Exception as exc:
                        life.stream_ended(None, request.id, ok=False)
                        error = as_conveyor_error(exc, "stream")
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
                        t: InferLife = life,
                    ) -> None:
                        loop.call_soon_threadsafe(finished, f, c, t)

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
                if answer is _STALLED:
                    message = stalled_message(self._send_timeout)
                    await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
                if answer is None:
                    reading = False
                    reader.result()  # re-raise what ended the request stream, if anything
                    continue
                if isinstance(answer, _Partial):
                    yield answer.payload
                    sent.at = loop.time()
                    answer.written.set()  # the pump may take the next response
                    continue
                unanswered -= 1
                if answer is _ANSWERED:
                    continue
                assert isinstance(answer, bytes | list | pb.ModelStreamInferResponse)
                yield answer
                sent.at = loop.time()
        finally:
            self._streams.discard(answers)
            reader.cancel()
            for pump in pumps:
                pump.cancel()  # closes its stream: the model stops at its next response
            for future in running:
                future.cancel()  # the client is gone: drop what is still queued

    async def _stream_responses(
        self,
        call: converters.InferCall,
        final_flag: bool,
        answers: asyncio.Queue[Any],
        life: InferLife,
        sent: _Progress,
        stalled: Callable[[], None],
    ) -> None:
        """One request to a decoupled model: each response onto ``answers`` as it comes,
        the next only once the previous was written (a slow client slows the model), then
        the end of the request (an empty final response, for a client that asked).
        ``life``: the request's, ended with it. A response the stream's client does not
        take within the send timeout (``sent``: when it last took any) cancels the request
        and ends the stream (``stalled``)."""
        model, request_id = call.model, call.request_id
        ok = False
        try:
            stream = life.stream(call.request)
        except Exception as exc:
            life.stream_ended(None, request_id, ok=False)
            error = as_conveyor_error(exc, "stream")
            answers.put_nowait(_stream_error(model, call.version or "", request_id, error))
            return
        version = stream.model_version or ""
        try:
            async for outputs in stream:
                written = asyncio.Event()
                payload = decoupled.partial_response_bytes(model, version, request_id, outputs)
                answers.put_nowait(_Partial(payload, written))
                if not await self._taken(written, sent):
                    stalled()
                    return  # the finally closes the stream: the model's next send fails
            if final_flag:
                answers.put_nowait(decoupled.final_response(model, version, request_id))
            else:
                answers.put_nowait(_ANSWERED)
            ok = True
        except Exception as exc:
            error = as_conveyor_error(exc, "a streamed request")
            answers.put_nowait(_stream_error(model, version, request_id, error))
        finally:
            stream.close()
            life.stream_ended(version, request_id, ok)

    async def _taken(self, written: asyncio.Event, sent: _Progress) -> bool:
        """Wait until ``written``; False once the stream's client took nothing (no answer
        of the stream written) for the send timeout since this response was queued."""
        timeout = self._send_timeout
        if timeout <= 0:
            await written.wait()
            return True
        loop = asyncio.get_running_loop()
        queued = loop.time()  # the clock runs from now, or from the last answer taken
        while not written.is_set():
            left = max(queued, sent.at) + timeout - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(written.wait(), left)
            except TimeoutError:
                continue  # another answer may have been written meanwhile: look again
        return True

    # -- health and metadata --------------------------------------------------------------

    async def ServerLive(self, request: pb.ServerLiveRequest, context: Context) -> Any:
        return pb.ServerLiveResponse(live=self.data.live())

    async def ServerReady(self, request: pb.ServerReadyRequest, context: Context) -> Any:
        return pb.ServerReadyResponse(ready=self.data.not_ready_reason() is None)

    async def ModelReady(self, request: pb.ModelReadyRequest, context: Context) -> Any:
        try:
            reason = self.data.model_not_ready_reason(request.name, request.version or None)
        except ConveyorError:
            reason = "unknown"  # starting, unknown or malformed: not ready, as Triton answers
        return pb.ModelReadyResponse(ready=reason is None)

    @answering_errors
    async def ServerMetadata(self, request: pb.ServerMetadataRequest, context: Context) -> Any:
        return _parse(self.data.server_metadata(), pb.ServerMetadataResponse)

    @answering_errors
    async def ModelMetadata(self, request: pb.ModelMetadataRequest, context: Context) -> Any:
        data = self.data.model_metadata(request.name, request.version or None)
        return _parse(data, pb.ModelMetadataResponse)

    @answering_errors
    async def ModelConfig(self, request: pb.ModelConfigRequest, context: Context) -> Any:
        data = self.data.model_config(request.name, request.version or None)
        return pb.ModelConfigResponse(config=_parse(data, model_config_pb2.ModelConfig))

    @answering_errors
    async def ModelStatistics(self, request: pb.ModelStatisticsRequest, context: Context) -> Any:
        data = self.data.statistics(request.name or None, request.version or None)
        return _parse(data, pb.ModelStatisticsResponse)

    # -- model repository ------------------------------------------------------------------

    @answering_errors
    async def RepositoryIndex(self, request: pb.RepositoryIndexRequest, context: Context) -> Any:
        entries = self.data.repository_index(request.ready)
        return _parse({"models": entries}, pb.RepositoryIndexResponse)

    @answering_errors
    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, context: Context
    ) -> Any:
        parameters = {
            key: getattr(value, value.WhichOneof("parameter_choice") or "string_param")
            for key, value in request.parameters.items()
        }
        await self.data.load(request.model_name, parameters)
        return pb.RepositoryModelLoadResponse()

    @answering_errors
    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, context: Context
    ) -> Any:
        await self.data.unload(request.model_name)
        return pb.RepositoryModelUnloadResponse()

    # -- shared memory --------------------------------------------------------------------

    @answering_errors
    async def SystemSharedMemoryStatus(
        self, request: pb.SystemSharedMemoryStatusRequest, context: Context
    ) -> Any:
        response = pb.SystemSharedMemoryStatusResponse()
        for entry in self.data.system_shared_memory_status(request.name or None):
            response.regions[entry["name"]].CopyFrom(
                pb.SystemSharedMemoryStatusResponse.RegionStatus(**entry)
            )
        return response

    @answering_errors
    async def SystemSharedMemoryRegister(
        self, request: pb.SystemSharedMemoryRegisterRequest, context: Context
    ) -> Any:
        if not request.key:
            raise InvalidInput(
                f"register {request.name!r}: 'key' must name the shared memory object"
            )
        self.data.register_system_shared_memory(
            request.name, request.key, request.offset, request.byte_size
        )
        return pb.SystemSharedMemoryRegisterResponse()

    @answering_errors
    async def SystemSharedMemoryUnregister(
        self, request: pb.SystemSharedMemoryUnregisterRequest, context: Context
    ) -> Any:
        self.data.unregister_system_shared_memory(request.name or None)
        return pb.SystemSharedMemoryUnregisterResponse()

    # -- logging extension ----------------------------------------------------------------

    @answering_errors
    async def LogSettings(self, request: pb.LogSettingsRequest, context: Context) -> Any:
        """No settings: read them; some: change those. Answers every setting."""
        if request.settings:
            changes = {name: _setting_value(value) for name, value in request.settings.items()}
            settings = self.data.update_log_settings(changes)
        else:
            settings = self.data.log_settings()
        response = pb.LogSettingsResponse()
        for name, value in settings.items():
            field = response.settings[name]
            if isinstance(value, bool):
                field.bool_param = value
            elif isinstance(value, int):
                field.uint32_param = value
            else:
                field.string_param = str(value)
        return response

    @answering_errors
    async def CudaSharedMemoryStatus(
        self, request: pb.CudaSharedMemoryStatusRequest, context: Context
    ) -> Any:
        self.data.cuda_shared_memory_status(request.name or None)  # no regions, or an error
        return pb.CudaSharedMemoryStatusResponse()

    @answering_errors
    async def CudaSharedMemoryRegister(
        self, request: pb.CudaSharedMemoryRegisterRequest, context: Context
    ) -> Any:
        self.data.register_cuda_shared_memory(request.name)

    @answering_errors
    async def CudaSharedMemoryUnregister(
        self, request: pb.CudaSharedMemoryUnregisterRequest, context: Context
    ) -> Any:
        self.data.unregister_cuda_shared_memory(request.name or None)
        return pb.CudaSharedMemoryUnregisterResponse()

    @answering_errors
    async def TraceSetting(self, request: pb.TraceSettingRequest, context: Context) -> Any:
        return trace_setting(self.data, request)


Received = tuple[pb.ModelInferRequest, Sequence[bytes | memoryview]]


class _UnaryInfer:
    """One ModelInfer call driven by callbacks (see :meth:`InferenceServicer.start_infer`):
    made as the request is read, it submits it; :meth:`answer` builds the response once
    :attr:`future` is done."""

    __slots__ = ("_call", "_context", "_life", "_received", "_servicer", "_started", "future")

    def __init__(self, servicer: InferenceServicer, received: Message_, context: Context) -> None:
        self._servicer = servicer
        self._context = context
        self._started = started = servicer._clock()
        self._life: InferLife | None = None
        self._received: Message_ | None = received
        try:
            if isinstance(received, InvalidInput):
                raise received  # the message itself could not be parsed
            assert not isinstance(received, LargeMessage)  # start_infer sends those on
            self._life = life = servicer._life(received[0].model_name, context, started)
            self._call = call = converters.infer_call(*received)
            self.future = servicer._submit(life, call, context)
        except Exception as exc:
            self._fail(exc)

    def answer(self) -> Any:
        """The response, once :attr:`future` is done; raises ``grpc.aio.AbortError`` (the
        status on the context) if the request failed."""
        life = self._life
        assert life is not None  # submitted: the constructor raised otherwise
        future = self.future
        try:
            try:
                outputs = future.result()
            except concurrent.futures.CancelledError:
                raise Cancelled("the request was cancelled") from None
            return self._servicer._infer_response(
                life, self._call, future, outputs, self._context, self._started
            )
        except Exception as exc:
            self._fail(exc)
        finally:
            self._received = None  # the response no longer needs the request's views

    def cancel(self) -> None:
        """The client went away (or its deadline passed): drop the request if queued."""
        self.future.cancel()

    def _fail(self, exc: Exception) -> NoReturn:
        context = self._context
        code, text = self._servicer._infer_failed(self._received, self._life, exc, self._started)
        self._received = None
        context.set_code(code)
        context.set_details(text)
        raise grpc.aio.AbortError()


def _setting_value(value: pb.LogSettingsRequest.SettingValue) -> bool | int | str | None:
    """A setting's value as the data plane takes it (None: no value was set)."""
    choice = value.WhichOneof("parameter_choice")
    return None if choice is None else getattr(value, choice)


# An infer request message at least this large is parsed and converted on a worker thread,
# not the event loop: the protobuf scan and one array per input cost time linear in its
# size (a 64 MiB message of tiny fields took 1.8 s), which would stall every other call.
LARGE_MESSAGE_BYTES = 1 << 20


class LargeMessage:
    """An infer request message too large to read on the event loop (see
    :data:`LARGE_MESSAGE_BYTES`); :meth:`decoded` reads it on a worker thread."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def decoded(self) -> tuple[Received, converters.InferCall]:
        """The parsed message and the request it carries; raises as the handler would."""
        return await asyncio.to_thread(_decode_large, self.data)


def _decode_large(data: bytes) -> tuple[Received, converters.InferCall]:
    received = _parse_infer_request(data)
    if isinstance(received, InvalidInput):
        try:
            raise received
        finally:
            # The error's traceback holds this frame: the frame must not hold the error
            # (a cycle that would keep the message until a full garbage collection).
            del received
    return received, converters.infer_call(*received)


# What a ModelInfer handler receives: the parsed message, why it could not be parsed, or a
# large message to parse off the loop.
Message_ = Received | InvalidInput | LargeMessage


def _read_infer_request(data: bytes) -> Received | InvalidInput | LargeMessage:
    if len(data) >= LARGE_MESSAGE_BYTES:
        return LargeMessage(data)
    return _parse_infer_request(data)


def _parse_infer_request(data: bytes) -> Received | InvalidInput:
    # The raw tensors stay views into the received bytes (wire.split_raw): no copies.
    try:
        return wire.split_raw(data, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
    except DecodeError as exc:
        # Raised here, gRPC would answer UNKNOWN; the handler answers INVALID_ARGUMENT.
        return unparseable(pb.ModelInferRequest, exc, data)


def _write_infer_response(response: bytes | list[Any] | Message) -> bytes | list[Any]:
    # Infer answers are pre-serialized, in pieces (converters.infer_response_parts; a
    # transport joins them or writes them as they are); decoupled partial answers are
    # bytes; errors are still messages.
    return response.SerializeToString() if isinstance(response, Message) else response


def _parse(data: dict[str, Any], message: type[R]) -> R:
    """A metadata dict (Triton's JSON form, from conveyor.repository.triton_json) as a message."""
    # Fields Conveyor's .proto leaves out (e.g. version_policy) are skipped, not errors.
    return json_format.ParseDict(data, message(), ignore_unknown_fields=True)


def _stream_response(
    future: InferFuture, call: converters.InferCall
) -> list[Any] | pb.ModelStreamInferResponse:
    if future.cancelled():
        error: BaseException | None = Cancelled("the request was cancelled")
    else:
        error = future.exception()
    version = future.model_version or ""
    if error is None:
        try:
            return converters.infer_response_parts(
                call.model,
                version,
                call.request_id,
                future.result(),
                call.shared_memory.outputs,
                stream=True,
            )
        except Exception as exc:
            error = exc
    return _stream_error(
        call.model, version, call.request_id, as_conveyor_error(error, "a streamed request")
    )


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
        error_message=details(error.message), infer_response=response
    )
