"""The data plane as a front-end process sees it: every call forwarded to the engine process.

:class:`RemoteDataPlane` has the methods of :class:`~conveyor.server.dataplane.DataPlane`,
so the HTTP and gRPC front ends run over it unchanged. ``infer`` returns an
:class:`~conveyor.futures.InferFuture` at once and queues the call (tensors as raw
buffers, :mod:`infer_frames`) on the multiplexed connection, written with every other call
queued in the same loop iteration; the replies, read by this process's loop as they
arrive (:class:`~conveyor.server.workers.channel.FrameChannel`), complete the futures with
the engine's outputs or its error (the same Conveyor error type, so the status code is the
same). ``load``/``unload`` are awaited the same way.

Streams (``stream``, ``generate``) are started by a control call and their responses fed
into a local :class:`~conveyor.streams.ResponseStream` as they arrive; closing it cancels
the call in the engine process. The control calls the front ends make synchronously
(readiness, metadata, statistics, shared-memory regions) are one blocking round trip on a
second connection, served by a thread of the engine process: tens of microseconds on an
idle machine. ``live`` and the server metadata are answered here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import pickle
import socket
import threading
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, cast

from conveyor.errors import ConveyorError, Unavailable, Unsupported
from conveyor.futures import InferFuture
from conveyor.ipc.channel import Channel
from conveyor.ipc.frames import Buffer, frame_parts
from conveyor.server.dataplane import DataPlane
from conveyor.server.generate import GenerateResponses
from conveyor.server.workers import infer_frames
from conveyor.server.workers.channel import FrameChannel
from conveyor.server.workers.messages import (
    Cancel,
    Control,
    ControlMethod,
    Generate,
    Infer,
    Load,
    Observe,
    Reply,
    Stream,
    StreamEnd,
    StreamItem,
    Unload,
)
from conveyor.streams import ResponseStream

if TYPE_CHECKING:
    from conveyor.protocol.request import InferenceRequest
    from conveyor.protocol.shared_memory import SharedMemoryUse
    from conveyor.repository.openai_spec import OpenAIEmbeddings
    from conveyor.server.tracing.trace import RequestTrace

# How long an answered request's latency may wait to reach the engine process's histograms
# (a scrape sees it that much later); batching saves that process a wakeup per request.
OBSERVE_EVERY_S = 0.05
ENGINE_GONE = "the engine process is gone; this front end is shutting down"
# Responses of a stream that may wait in a front end for its client to read them; the
# engine process stops sending once this process stops reading (socket backpressure), so
# this bounds only what is already in flight.
STREAM_BUFFER = 256


class RemoteDataPlane(DataPlane):
    """A DataPlane whose engine is in another process (see the module docstring)."""

    def __init__(self, control: socket.socket, calls: socket.socket) -> None:
        super().__init__(version="")  # nothing local: every answer comes from the engine
        self._control = Channel(control)
        self._control_lock = threading.Lock()
        self._calls_socket = calls
        self._channel: FrameChannel | None = None
        self._loop_running: asyncio.AbstractEventLoop | None = None
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._streams: dict[int, ResponseStream] = {}
        self._ids = itertools.count(1)
        self._metadata: dict[str, Any] | None = None
        self._observed: list[tuple[str, str, float, str]] = []
        self.gone = asyncio.Event()  # set when the engine process's connection closes

    async def connect(self) -> None:
        self._loop_running = asyncio.get_running_loop()
        self._channel = await FrameChannel.open(
            self._calls_socket, self._on_frame, self._engine_gone
        )

    def _on_frame(self, kind: int, meta: Buffer, buffers: list[Buffer]) -> None:
        if kind == infer_frames.INFER_REPLY:
            call_id, request_id, model, version, outputs = infer_frames.read_reply(meta, buffers)
            future = self._pending.pop(call_id, None)
            if future is None or future.done():
                return
            if isinstance(future, InferFuture):
                future.request_id, future.model_name, future.model_version = (
                    request_id,
                    model,
                    version,
                )
            future.set_result(outputs)
            return
        reply: Reply | StreamItem | StreamEnd = pickle.loads(meta, buffers=buffers)
        if not isinstance(reply, Reply):
            self._stream_message(reply)
            return
        future = self._pending.pop(reply.call_id, None)
        if future is None or future.done():
            return
        if isinstance(future, InferFuture) and reply.served is not None:
            future.request_id, future.model_name, future.model_version = reply.served
        if isinstance(reply.error, asyncio.CancelledError):
            future.cancel()
        elif reply.error is not None:
            future.set_exception(reply.error)
        else:
            future.set_result(reply.value)

    def _engine_gone(self) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(Unavailable(ENGINE_GONE))
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream.finish(Unavailable(ENGINE_GONE))
        self.gone.set()

    def _stream_message(self, message: StreamItem | StreamEnd) -> None:
        if isinstance(message, StreamEnd):
            ended = self._streams.pop(message.call_id, None)
            if ended is not None:
                ended.finish(message.error)
            return
        stream = self._streams.get(message.call_id)
        if stream is None or stream.closed:
            return
        try:
            stream.put(message.item, timeout=0)
        except ConveyorError as exc:  # its client reads nothing: end it, stop the model
            self._streams.pop(message.call_id, None)
            stream.finish(exc)
            self._write_cancel(message.call_id)

    # -- the two kinds of call --------------------------------------------------------------

    def _call(self, method: ControlMethod, *args: Any) -> Any:
        """One blocking round trip on the control connection."""
        return self._round_trip(Control(0, method, args)).value

    def _round_trip(self, call: Control | Stream | Generate) -> Reply:
        with self._control_lock:
            try:
                self._control.send(call)
                reply: Reply = self._control.recv()[0]
            except (EOFError, OSError):
                raise Unavailable(ENGINE_GONE) from None
        if reply.error is not None:
            raise reply.error
        return reply

    def _send_call(
        self, future: concurrent.futures.Future[Any], call: Infer | Load | Unload
    ) -> None:
        self._send_frame(future, call.call_id, frame_parts(call))

    def _send_frame(
        self, future: concurrent.futures.Future[Any], call_id: int, parts: list[bytes | memoryview]
    ) -> None:
        channel = self._channel
        if channel is None or self.gone.is_set():
            raise Unavailable(ENGINE_GONE)
        self._pending[call_id] = future
        channel.send(parts)

    async def _await_call(self, call: Load | Unload) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._send_call(future, call)
        return await asyncio.wrap_future(future)

    # -- health, metadata, statistics ------------------------------------------------------

    def not_ready_reason(self) -> str | None:
        if self.draining:
            return "the server is shutting down"
        reason: str | None = self._call(ControlMethod.NOT_READY_REASON)
        return reason

    def model_not_ready_reason(self, name: str, version: str | None) -> str | None:
        reason: str | None = self._call(ControlMethod.MODEL_NOT_READY_REASON, name, version)
        if reason is None and self.draining:
            return f"model {name!r} is not ready"
        return reason

    def server_metadata(self) -> dict[str, Any]:
        if self._metadata is None:  # the same for the server's whole life
            self._metadata = self._call(ControlMethod.SERVER_METADATA)
        return self._metadata

    def model_metadata(self, name: str, version: str | None) -> dict[str, Any]:
        value: dict[str, Any] = self._call(ControlMethod.MODEL_METADATA, name, version)
        return value

    def model_config(self, name: str, version: str | None) -> dict[str, Any]:
        value: dict[str, Any] = self._call(ControlMethod.MODEL_CONFIG, name, version)
        return value

    def openai_embeddings(self, name: str) -> OpenAIEmbeddings | None:
        value: OpenAIEmbeddings | None = self._call(ControlMethod.OPENAI_EMBEDDINGS, name)
        return value

    def openai_models(self) -> list[str]:
        value: list[str] = self._call(ControlMethod.OPENAI_MODELS)
        return value

    def statistics(self, name: str | None, version: str | None) -> dict[str, Any]:
        value: dict[str, Any] = self._call(ControlMethod.STATISTICS, name, version)
        return value

    def repository_index(self, ready_only: bool) -> list[dict[str, Any]]:
        value: list[dict[str, Any]] = self._call(ControlMethod.REPOSITORY_INDEX, ready_only)
        return value

    async def load(self, name: str, parameters: Mapping[str, object] | None = None) -> None:
        await self._await_call(Load(next(self._ids), name, dict(parameters or {})))

    async def unload(self, name: str) -> None:
        await self._await_call(Unload(next(self._ids), name))

    # -- shared memory: one registry, in the engine process ---------------------------------

    def register_system_shared_memory(
        self, name: str, key: str, offset: int, byte_size: int
    ) -> None:
        self._call(ControlMethod.REGISTER_SYSTEM_SHARED_MEMORY, name, key, offset, byte_size)

    def unregister_system_shared_memory(self, name: str | None) -> None:
        self._call(ControlMethod.UNREGISTER_SYSTEM_SHARED_MEMORY, name)

    def system_shared_memory_status(self, name: str | None) -> list[dict[str, Any]]:
        value: list[dict[str, Any]] = self._call(ControlMethod.SYSTEM_SHARED_MEMORY_STATUS, name)
        return value

    def cuda_shared_memory_status(self, name: str | None) -> list[dict[str, Any]]:
        value: list[dict[str, Any]] = self._call(ControlMethod.CUDA_SHARED_MEMORY_STATUS, name)
        return value

    def unregister_cuda_shared_memory(self, name: str | None) -> None:
        self._call(ControlMethod.UNREGISTER_CUDA_SHARED_MEMORY, name)

    def register_cuda_shared_memory(self, name: str) -> NoReturn:
        self._call(ControlMethod.REGISTER_CUDA_SHARED_MEMORY, name)
        raise AssertionError("the engine process always refuses a CUDA region")

    # -- logging and tracing: the engine process's settings ----------------------------------

    def log_settings(self) -> dict[str, Any]:
        value: dict[str, Any] = self._call(ControlMethod.LOG_SETTINGS)
        return value

    def update_log_settings(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        value: dict[str, Any] = self._call(ControlMethod.UPDATE_LOG_SETTINGS, dict(changes))
        return value

    def trace_settings(self, model: str | None) -> dict[str, str | list[str]]:
        value: dict[str, str | list[str]] = self._call(ControlMethod.TRACE_SETTINGS, model)
        return value

    def update_trace_settings(
        self, model: str | None, changes: Mapping[str, Any]
    ) -> dict[str, str | list[str]]:
        # Sampling happens where a request arrives: in each front end, which has no trace
        # sink of its own yet.
        raise Unsupported(
            "request tracing is not available with front-end processes (--workers > 1) yet; "
            "serve with --workers 1 to trace requests"
        )

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._control.close()

    # -- inference --------------------------------------------------------------------------

    def infer(
        self,
        request: InferenceRequest,
        *,
        classifications: Mapping[str, int] | None = None,
        wait_limit: float | None = None,
        shared_memory: SharedMemoryUse | None = None,
        trace: RequestTrace | None = None,  # never set: tracing is off in front ends
    ) -> InferFuture:
        call_id = next(self._ids)
        parts = None
        if not classifications and not shared_memory:
            parts = infer_frames.call_frame(call_id, request, wait_limit)
        if parts is None:  # no lean frame for these tensors or arguments: pickle the call
            # Views over the HTTP body become owned arrays when pickled.
            message = Infer(call_id, request, classifications, wait_limit, shared_memory)
            parts = frame_parts(message)
        request_id, model = request.id, request.model
        future = InferFuture()
        future.request_id = request_id
        future.model_name = model
        self._send_frame(future, call_id, parts)
        future.add_done_callback(lambda done: self._cancelled(call_id, done))
        return future

    def _cancelled(self, call_id: int, future: concurrent.futures.Future[Any]) -> None:
        # The caller cancelled (its client went away): tell the engine to drop the request.
        if future.cancelled() and self._pending.pop(call_id, None) is not None:
            loop = self._loop()
            if loop is not None:  # the loop owns the writer: write from it
                loop.call_soon_threadsafe(self._write_cancel, call_id)

    def _write_cancel(self, call_id: int) -> None:
        if self._channel is not None:
            self._channel.send(frame_parts(Cancel(call_id)))

    def _loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop_running

    def is_decoupled(self, model: str, version: str | None) -> bool:
        value: bool = self._call(ControlMethod.IS_DECOUPLED, model, version)
        return value

    def stream(
        self, request: InferenceRequest, *, trace: RequestTrace | None = None
    ) -> ResponseStream:
        return self._start_stream(Stream(next(self._ids), request))

    def generate(
        self, model: str, version: str | None, request: Mapping[str, Any], **unused: object
    ) -> GenerateResponses:
        # Built in the engine process (it has the model's config); its JSON objects come
        # back as the stream's items. No trace is given: tracing is off in front ends.
        stream = self._start_stream(Generate(next(self._ids), model, version, dict(request)))
        return _RemoteGenerateResponses(stream, model)

    def _start_stream(self, message: Stream | Generate) -> ResponseStream:
        """Start a streamed call: the control round trip registers it and says who serves
        it; its responses then arrive on the multiplexed connection (read by this loop
        only after this returns, so none is missed)."""
        call_id = message.call_id
        stream = ResponseStream(buffer=STREAM_BUFFER)
        self._streams[call_id] = stream
        try:
            served = self._round_trip(message).served
        except BaseException:
            self._streams.pop(call_id, None)
            raise
        if served is not None:
            stream.request_id, stream.model_name, stream.model_version = served
        stream.on_close(lambda: self._stream_closed(call_id))
        return stream

    def _stream_closed(self, call_id: int) -> None:
        # The front end closed the stream (its client went away, or it was answered).
        if self._streams.pop(call_id, None) is not None:
            loop = self._loop()
            if loop is not None:
                loop.call_soon_threadsafe(self._write_cancel, call_id)

    def observe_latency(self, future: InferFuture, seconds: float, protocol: str) -> None:
        if future.model_name is None:
            return
        self._observed.append((future.model_name, future.model_version or "", seconds, protocol))
        if len(self._observed) == 1:  # the first since the last batch: send them soon
            asyncio.get_running_loop().call_later(OBSERVE_EVERY_S, self._send_observed)

    def _send_observed(self) -> None:
        samples, self._observed = tuple(self._observed), []
        if samples and self._channel is not None:
            self._channel.send(frame_parts(Observe(samples)))


class _RemoteGenerateResponses(GenerateResponses):
    """Generate responses whose JSON objects were built in the engine process."""

    async def _objects(self) -> AsyncIterator[dict[str, Any]]:
        async for item in self._stream:
            yield cast(dict[str, Any], item)
