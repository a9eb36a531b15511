"""The engine process's end of one front-end process: calls in, answers out.

Two connections per front end. The asynchronous one, read and written by the engine
process's event loop itself (:class:`~conveyor.server.workers.channel.FrameChannel`),
carries inference and load/unload, multiplexed by call id: every infer call a read
completed goes straight to the real :class:`~conveyor.server.dataplane.DataPlane` (so one
queue per model sees every front end's requests). The instance thread that completes a
request writes its reply itself, without waking the loop (see ``socket_writer.py``). The
blocking connection carries the short control calls (health, metadata, statistics,
shared-memory regions), served on a thread of its own so they never wait behind inference
on the loop.

When a front end's connection closes (the process died), the requests it had admitted and
that are still queued are cancelled: nobody is left to read their answers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import pickle
import socket
import threading
from typing import TYPE_CHECKING, Any

from conveyor.ipc.channel import Channel
from conveyor.ipc.frames import Buffer, frame_parts
from conveyor.server.workers import infer_frames, messages
from conveyor.server.workers.channel import FrameChannel

if TYPE_CHECKING:
    from conveyor.futures import InferFuture
    from conveyor.server.dataplane import DataPlane

log = logging.getLogger("conveyor.server.workers")


class FrontEndLink:
    """Serves one front-end process over its two connections until it goes away."""

    def __init__(
        self, data: DataPlane, control: socket.socket, calls: socket.socket, name: str
    ) -> None:
        self._data = data
        self._control = Channel(control)
        self._calls = calls
        self.name = name
        self._in_flight: dict[int, InferFuture] = {}
        self._streams: dict[int, Any] = {}  # call id -> ResponseStream or GenerateResponses
        self._closed = False
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[None]] = set()
        self._channel: FrameChannel | None = None
        self._thread = threading.Thread(
            target=self._serve_control, name=f"{name}-control", daemon=True
        )
        self.served: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._thread.start()
        self.served = asyncio.get_running_loop().create_task(self._serve_calls())

    # -- control calls, on their own thread ---------------------------------------------------

    def _serve_control(self) -> None:
        connection = self._control
        while True:
            try:
                call, _ = connection.recv()
            except (EOFError, OSError):
                return
            try:
                connection.send(self._control_reply(call))
            except OSError:
                return

    def _control_reply(
        self, message: messages.Control | messages.Stream | messages.Generate
    ) -> messages.Reply:
        if isinstance(message, messages.Stream | messages.Generate):
            return self._start_stream(message)
        if not isinstance(message, messages.Control):
            error = ValueError(f"{type(message).__name__} is not a control call")
            return messages.Reply(getattr(message, "call_id", 0), error=error)
        try:
            value = getattr(self._data, message.method.value)(*message.args)
        except Exception as exc:
            return messages.Reply(message.call_id, error=messages.portable(exc))
        return messages.Reply(message.call_id, value=value)

    # -- streamed calls ---------------------------------------------------------------------

    def _start_stream(self, message: messages.Stream | messages.Generate) -> messages.Reply:
        # On the control thread; the engine's stream() and generate() return at once.
        # Started by a control round trip, which answers with the model and version serving
        # it (the front end needs them at once); its responses are then pumped on the loop,
        # each a StreamItem on the multiplexed connection.
        stream: Any
        try:
            if isinstance(message, messages.Stream):
                stream = self._data.stream(message.request)
            else:
                stream = self._data.generate(message.model, message.version, message.body)
        except Exception as exc:
            return messages.Reply(message.call_id, error=messages.portable(exc))
        served = (
            getattr(stream, "request_id", None),
            getattr(stream, "model_name", None) or getattr(stream, "model", None),
            getattr(stream, "model_version", None) or getattr(stream, "version", None),
        )
        self._loop.call_soon_threadsafe(self._pump_later, message.call_id, stream)
        return messages.Reply(message.call_id, served=served)

    def _pump_later(self, call_id: int, stream: Any) -> None:
        if self._closed:
            stream.close()
            return
        self._streams[call_id] = stream
        task = self._loop.create_task(self._pump(call_id, stream))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pump(self, call_id: int, stream: Any) -> None:
        error: BaseException | None = None
        try:
            async for item in stream:
                self._send(messages.StreamItem(call_id, item))
                if self._channel is not None:
                    await self._channel.drain()  # a front end that reads slowly slows the model
        except Exception as exc:
            error = messages.portable(exc)
        finally:
            stream.close()
            if self._streams.pop(call_id, None) is not None:
                self._send(messages.StreamEnd(call_id, error))

    # -- inference and repository calls, on the loop --------------------------------------

    async def _serve_calls(self) -> None:
        lost: asyncio.Future[None] = self._loop.create_future()

        def on_lost() -> None:
            if not lost.done():
                lost.set_result(None)

        try:
            self._channel = await FrameChannel.open(self._calls, self._on_frame, on_lost)
            await lost
        finally:
            self.close()

    def _on_frame(self, kind: int, meta: Buffer, buffers: list[Buffer]) -> None:
        if kind == infer_frames.INFER_CALL:
            call_id, request, wait_limit = infer_frames.read_call(meta, buffers)
            try:
                future = self._data.infer(request, wait_limit=wait_limit)
            except Exception as exc:
                self._send(messages.Reply(call_id, error=messages.portable(exc)))
                return
            self._admitted(call_id, future)
            return
        message = pickle.loads(meta, buffers=buffers)
        if isinstance(message, messages.Cancel):
            queued = self._in_flight.get(message.call_id)
            if queued is not None:
                queued.cancel()
            stream = self._streams.pop(message.call_id, None)
            if stream is not None:
                stream.close()
        elif isinstance(message, messages.Observe):
            self._observe(message)
        elif isinstance(message, messages.Infer):
            # An infer whose tensors or arguments have no lean frame.
            try:
                future = self._data.infer(
                    message.request,
                    classifications=message.classifications,
                    wait_limit=message.wait_limit,
                    shared_memory=message.shared_memory,
                )
            except Exception as exc:
                self._send(messages.Reply(message.call_id, error=messages.portable(exc)))
                return
            self._admitted(message.call_id, future)
        elif isinstance(message, messages.Load | messages.Unload):
            task = asyncio.get_running_loop().create_task(self._repository(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            call_id = getattr(message, "call_id", 0)
            error = ValueError(f"{type(message).__name__} is not an inference or repository call")
            self._send(messages.Reply(call_id, error=error))

    def _admitted(self, call_id: int, future: InferFuture) -> None:
        self._in_flight[call_id] = future
        future.add_done_callback(functools.partial(self._answer, call_id))

    def _answer(self, call_id: int, future: concurrent.futures.Future[Any]) -> None:
        # On the instance thread that completed the request (or the loop, for one
        # cancelled there): the reply is written from here, the loop is not woken.
        self._in_flight.pop(call_id, None)
        channel = self._channel
        if channel is None or channel.closing:
            return
        served = (
            getattr(future, "request_id", None),
            getattr(future, "model_name", None),
            getattr(future, "model_version", None),
        )
        if future.cancelled():
            reply = messages.Reply(call_id, error=asyncio.CancelledError(), served=served)
        elif (error := future.exception()) is not None:
            reply = messages.Reply(call_id, error=messages.portable(error), served=served)
        else:
            outputs = future.result()
            parts = infer_frames.reply_frame(call_id, served, outputs)
            if parts is not None:
                channel.send_now(parts)
                return
            reply = messages.Reply(call_id, value=outputs, served=served)
        channel.send_now(_pickled(reply))

    async def _repository(self, message: messages.Load | messages.Unload) -> None:
        try:
            if isinstance(message, messages.Load):
                await self._data.load(message.name, message.parameters)
            else:
                await self._data.unload(message.name)
        except Exception as exc:
            self._send(messages.Reply(message.call_id, error=messages.portable(exc)))
        else:
            self._send(messages.Reply(message.call_id))

    def _observe(self, message: messages.Observe) -> None:
        histograms = self._data.histograms
        if histograms is not None:
            for model, version, seconds, protocol in message.samples:
                histograms.observe(model, version, seconds, protocol)

    def _send(self, reply: messages.Reply | messages.StreamItem | messages.StreamEnd) -> None:
        channel = self._channel
        if channel is not None and not channel.closing:
            channel.send(_pickled(reply))

    def close(self) -> None:
        """The front end is gone: drop its queued requests, close both connections."""
        self._closed = True
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream.close()
        in_flight, self._in_flight = self._in_flight, {}
        if in_flight:
            log.warning("%s: dropping %d request(s) it had admitted", self.name, len(in_flight))
        for future in in_flight.values():
            future.cancel()
        if self._channel is not None:
            self._channel.close()
        else:
            self._calls.close()
        with contextlib.suppress(OSError):
            self._control.sock.shutdown(socket.SHUT_RDWR)
        self._control.close()


def _pickled(
    reply: messages.Reply | messages.StreamItem | messages.StreamEnd,
) -> list[bytes | memoryview]:
    try:
        return frame_parts(reply)
    except Exception as exc:  # an output that cannot be pickled: say so, keep serving
        return frame_parts(messages.Reply(reply.call_id, error=messages.portable(exc)))
