"""One client connection: thin asyncio glue between a socket and :class:`~.core.H2Core`.

The core parses frames and keeps the protocol's state; this module turns its events into
gRPC calls (:class:`~.calls.Call`) and runs their handlers on the server's loop. DATA
payloads go straight from each read into their call's message when the core says the next
bytes are one (:meth:`~.core.H2Core.data_in_flight`); other reads go through a scratch
buffer shared by every connection (it is copied out before the next read, so one suffices).

A unary call's handler starts once its request is whole; a streaming call's at its HEADERS,
reading requests as they arrive. Responses go out with ``transport.writelines`` in DATA
frames no bigger than the client's frame size and windows allow; a sender that runs out of
window, or finds the transport's buffer full, waits for the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import weakref
from typing import Any, Protocol

import grpc

from conveyor.errors import Unauthenticated
from conveyor.server.auth import OPEN_GRPC_METHODS, BearerAuth
from conveyor.server.grpc.h2 import events as h2_events
from conveyor.server.grpc.h2 import frames as f
from conveyor.server.grpc.h2.calls import (
    INFLATE_WBITS,
    UNREAD_MESSAGES,
    Call,
    CallContext,
    CompressedMessage,
    InflatedTooLarge,
    MessageTooLarge,
    ReceiveBudget,
    ReceiveBudgetSpent,
    UndecodableMessage,
)
from conveyor.server.grpc.h2.core import H2Core
from conveyor.server.grpc.h2.limits import Limits
from conveyor.server.grpc.service import Bound, Serialized
from conveyor.wakeups import mailbox


class Service(Protocol):
    """What a connection needs of the server it belongs to (``h2.server.GrpcService``)."""

    methods: dict[str, Bound]  # by path, "/inference.GRPCInferenceService/ModelInfer"
    max_message: int
    limits: Limits
    auth: BearerAuth | None
    draining: bool

    @property
    def connections(self) -> set[GrpcConnection]: ...

    def call_ended(self, connection: GrpcConnection) -> None: ...

    def connection_closed(self, connection: GrpcConnection) -> None: ...


log = logging.getLogger("conveyor.server.grpc")

# Bytes of announced, not yet received messages a connection may hold buffers for (at least
# four of the largest messages allowed).
UNFINISHED_BYTES = 64 * 1024 * 1024
READ_SIZE = 256 * 1024  # the scratch buffer reads go into (but those into a message)
# A response in pieces up to this size is joined before it is written (cheaper than many
# small buffers); a larger one is written from its pieces, tensors uncopied.
SMALL_PAYLOAD = 64 * 1024

# One scratch buffer for every connection on a loop: a read lands in it and is copied out
# (bytes) before the loop asks any connection for a buffer again.
_SCRATCH: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, memoryview] = (
    weakref.WeakKeyDictionary()
)


def _scratch(loop: asyncio.AbstractEventLoop) -> memoryview:
    buffer = _SCRATCH.get(loop)
    if buffer is None:
        buffer = _SCRATCH[loop] = memoryview(bytearray(READ_SIZE))
    return buffer


# What can be wrong with a request message as it arrives: each ends its call, not the
# connection.
MessageFailure = (
    MessageTooLarge,
    InflatedTooLarge,
    ReceiveBudgetSpent,
    UndecodableMessage,
    CompressedMessage,
)


class GrpcConnection(asyncio.BufferedProtocol):
    def __init__(self, service: Service) -> None:
        self._service = service
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._mailbox = mailbox(self._loop)  # engine answers: one wakeup for many
        self._flush_scheduled = False
        self._core = H2Core(self._schedule_flush, service.limits)
        self._reading_paused = False  # the client does not read what its frames asked for
        self._timer: asyncio.TimerHandle | None = None  # the handshake or idle timeout
        self._handshaking = True
        self._scratch = _scratch(self._loop)
        self._direct: Call | None = None  # the call whose message the last read went into
        # Several maximal messages may be in flight at once; past that, calls are refused.
        self._budget = ReceiveBudget(max(UNFINISHED_BYTES, 4 * service.max_message))
        self._calls: dict[int, Call] = {}
        self._window_grew: asyncio.Future[None] | None = None
        # Large messages go out one after another, not interleaved: the client completes
        # (and gives window back for) each in turn instead of holding parts of all of them
        # while the connection's window is spent. A message whose own stream has no window
        # steps aside for the others.
        self._send_turn = asyncio.Lock()
        self._writable: asyncio.Future[None] | None = None  # set while the transport is full
        self._closed = False

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        self._service.connections.add(self)
        self._core.initiate()
        timeout = self._service.limits.handshake_timeout
        if timeout > 0:
            self._timer = self._loop.call_later(timeout, self._handshake_timed_out)
        if self._service.draining:
            self.goaway()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._service.connections.discard(self)
        for call in self._calls.values():
            call.drop()
            if call.handler is not None:
                call.handler.cancel()
                call.handler = None
        self._calls.clear()
        self._wake_senders()
        self.resume_writing()  # a sender waiting for room sees the connection closed
        self._stop_timer()
        # Nothing that refers back to this connection is left behind: it and its core are
        # freed when the last reference goes, not at the next garbage collection.
        self._core.detach()
        self._transport = None
        self._service.connection_closed(self)

    def pause_writing(self) -> None:
        self._core.output_blocked = True
        if self._writable is None:
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        self._core.output_blocked = False
        self._core.induced = 0
        if self._reading_paused:
            self._reading_paused = False
            if self._transport is not None and not self._closed:
                self._transport.resume_reading()
        writable = self._writable
        self._writable = None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _backpressure(self) -> None:
        """Stop reading a client that sends frames we must answer and does not read them;
        once its handshake is over, the handshake timeout gives way to the idle one."""
        if self._handshaking and self._core.handshaken:
            self._handshaking = False
            self._stop_timer()
            self._idle_timer()
        if self._core.read_paused and not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    # -- timeouts -------------------------------------------------------------------------

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _handshake_timed_out(self) -> None:
        self._timer = None
        if not self._handshaking or self._closed:
            return
        log.info("closing a gRPC connection: no HTTP/2 preface and SETTINGS in time")
        self._fail(self._core.terminate(f.PROTOCOL_ERROR, "no preface and SETTINGS in time"))

    def _idle_timer(self) -> None:
        """With an idle timeout: (re)start its clock when the last call ends."""
        timeout = self._service.limits.idle_timeout
        if timeout > 0 and not self._calls and not self._closed:
            self._stop_timer()
            self._timer = self._loop.call_later(timeout, self._idle_timed_out)

    def _idle_timed_out(self) -> None:
        self._timer = None
        if self._calls or self._closed:
            return
        self.goaway()  # a GOAWAY, then closed at once: no call runs
        self._last_goaway()

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the next read goes: straight into a message's buffer while a DATA frame's
        payload fills one (the bytes are never copied again), else the scratch buffer."""
        stream, left = self._core.data_in_flight()
        if stream is not None:
            call = self._calls.get(stream.stream_id)
            if call is not None and not call.finished:
                target = call.direct_buffer(left)
                if target is not None:
                    self._direct = call
                    return target
        self._direct = None
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        call = self._direct
        try:
            if call is None:
                self._handle(self._core.receive_data(bytes(self._scratch[:nbytes])))
            else:
                self._direct = None
                try:
                    call.filled(nbytes)
                except MessageFailure as exc:
                    self._message_failed(call, exc)
                self._handle(self._core.received_directly(nbytes))
            self._backpressure()
        except Exception:
            log.exception("gRPC connection failed")
            self._fail(self._core.terminate(f.INTERNAL_ERROR, "internal error"))

    def data_received(self, data: bytes) -> None:
        try:
            self._handle(self._core.receive_data(data))
            self._backpressure()
        except Exception:
            log.exception("gRPC connection failed")
            self._fail(self._core.terminate(f.INTERNAL_ERROR, "internal error"))

    # -- events ---------------------------------------------------------------------------

    def _handle(self, events: list[h2_events.Event]) -> None:
        calls = self._calls
        for event in events:
            if type(event) is h2_events.DataReceived:
                call = calls.get(event.stream_id)
                if call is not None and not call.finished:
                    try:
                        call.feed(event.data, event.start, event.end)
                    except MessageFailure as exc:
                        self._message_failed(call, exc)
            elif type(event) is h2_events.RequestReceived:
                self._stop_timer()  # the handshake is over; the connection is not idle
                self._open(event)
            elif type(event) is h2_events.StreamEnded:
                call = calls.get(event.stream_id)
                if call is not None:
                    self._remote_closed(call)
            elif type(event) is h2_events.DataFrameEnded:
                call = calls.get(event.stream_id)
                if call is not None and not call.finished:
                    self._give_credit(call)
            elif type(event) is h2_events.WindowsChanged:
                self._wake_senders()
            elif type(event) is h2_events.StreamReset:
                call = calls.pop(event.stream_id, None)
                if call is not None:
                    call.drop()  # the client cancelled it: nothing more is sent
                    if call.handler is not None:
                        call.handler.cancel()
                        call.handler = None
                    self._wake_senders()
                    self._service.call_ended(self)
            elif type(event) is h2_events.DrainPingAcked:
                self._last_goaway()
            elif type(event) is h2_events.GoAwayReceived:
                self.goaway()  # the client goes: finish what runs, then close
            elif type(event) is h2_events.ConnectionTerminated:
                self._fail(event)

    def _message_failed(self, call: Call, exc: Exception) -> None:
        """End ``call`` for what was wrong with the message it was receiving."""
        if isinstance(exc, MessageTooLarge):
            self._refuse_message(call, exc.size)
            return
        limit = self._service.max_message
        code = grpc.StatusCode.RESOURCE_EXHAUSTED
        if isinstance(exc, InflatedTooLarge):
            why = (
                f"Received message larger than max (more than {limit} bytes once "
                f"decompressed vs. {limit})"
            )
        elif isinstance(exc, ReceiveBudgetSpent):
            why = (
                f"a message of {exc.size} bytes: this connection's calls already hold "
                f"{exc.held} bytes of unfinished messages (at most {exc.limit})"
            )
        elif isinstance(exc, UndecodableMessage):
            code = grpc.StatusCode.INTERNAL
            why = f"the message could not be decompressed with its grpc-encoding: {exc}"
        else:
            code = grpc.StatusCode.INTERNAL
            why = "a compressed message on a call without grpc-encoding"
        self._end(call, code, why)

    def _give_credit(self, call: Call) -> None:
        """Give a stream's received bytes back to the client's window, unless the call
        already holds as many unread messages as it may."""
        if not call.finished and len(call.messages) < UNREAD_MESSAGES:
            self._core.give_credit(call.stream)

    # -- calls ----------------------------------------------------------------------------

    def _open(self, event: h2_events.RequestReceived) -> None:
        head = event.head
        service = self._service
        method = service.methods.get(head.path)
        context = CallContext(head.metadata, head.timeout)
        stream = self._core.streams.get(event.stream_id)
        if stream is None:
            return  # reset by the client in the same read
        call = Call(stream, method, context, service.max_message, self._budget)
        call.remote_closed = event.ended
        self._calls[event.stream_id] = call
        if not head.content_type.startswith(b"application/grpc"):
            self._trailers_only_http(call, f.UNSUPPORTED_MEDIA_TYPE)
            return
        if method is None:
            self._end(call, grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
            return
        if head.encoding and head.encoding != b"identity":
            wbits = INFLATE_WBITS.get(head.encoding)
            if wbits is None:
                encoding = head.encoding[:64].decode("latin-1")  # not echoed whole
                self._end(
                    call, grpc.StatusCode.UNIMPLEMENTED,
                    f"grpc-encoding {encoding!r} is not supported: send identity, gzip or "
                    "deflate",
                )  # fmt: skip
                return
            call.wbits = wbits
        if service.auth is not None and head.path not in OPEN_GRPC_METHODS:
            try:
                service.auth.check(head.get("authorization"))
            except Unauthenticated as exc:
                self._end(call, grpc.StatusCode.UNAUTHENTICATED, exc.message)
                return
        if head.bad_timeout:
            value = head.bad_timeout[:32].decode("latin-1")
            self._end(
                call, grpc.StatusCode.INTERNAL,
                f"malformed grpc-timeout {value!r}: expected 1 to 8 digits and a unit of "
                "H, M, S, m, u or n",
            )  # fmt: skip
            return
        if head.timeout is not None:
            call.deadline_timer = self._loop.call_later(head.timeout, self._deadline_passed, call)
        if method.streaming:
            context._ender = functools.partial(self._abandon, call)
            call.handler = self._loop.create_task(self._stream(call))
        elif event.ended:
            self._end(call, grpc.StatusCode.INTERNAL, "the call sent no request message")

    def _deadline_passed(self, call: Call) -> None:
        """The client's ``grpc-timeout`` ran out: the call is cancelled, as grpcio does."""
        call.deadline_timer = None
        if call.finished:
            return
        if call.handler is not None:
            call.handler.cancel()
        self._end(call, grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")

    def _remote_closed(self, call: Call) -> None:
        call.remote_closed = True
        method = call.method
        if method is None or call.finished:
            return
        if method.streaming:
            if call.partial():
                self._end(call, grpc.StatusCode.INTERNAL, "the stream ended inside a message")
            call.wake()
            return
        if len(call.messages) != 1 or call.partial():
            self._end(
                call, grpc.StatusCode.INTERNAL if call.partial() else grpc.StatusCode.UNIMPLEMENTED,
                f"a unary call must send one request message, not {len(call.messages)}",
            )  # fmt: skip
            return
        self._start_unary(call, method)

    def _start_unary(self, call: Call, method: Bound) -> None:
        """Hand a unary call's one message to its method. A method that can be driven by
        callbacks (``Bound.start``: ModelInfer) costs no task: the engine's answer comes
        back through the loop's mailbox, with other answers that completed together."""
        try:
            message = call.take()
        except MessageFailure as exc:
            self._message_failed(call, exc)
            return
        try:
            received = method.deserialize(message)
            del message
            started = None if method.start is None else method.start(received, call.context)
        except Exception as exc:
            self._handler_failed(call, exc)
            return
        if started is None:
            call.handler = self._loop.create_task(self._unary(call, method, received))
            return
        # future -> callback -> call -> started -> future: a cycle until the answer (or
        # the call's end) takes ``started`` off the call.
        call.handler = started
        box = self._mailbox
        started.future.add_done_callback(lambda _: box.post(self._unary_answered, call))

    def _unary_answered(self, call: Call) -> None:
        started = call.handler
        call.handler = None
        if call.finished or started is None or isinstance(started, asyncio.Task):
            return  # reset, past its deadline, or its connection lost: nobody to answer
        method = call.method
        assert method is not None
        try:
            payload = method.serialize(started.answer())
        except Exception as exc:
            self._handler_failed(call, exc)
            return
        if not self._send(call, payload, True):
            call.handler = self._loop.create_task(self._send_slowly(call, payload, True))

    async def _unary(self, call: Call, method: Bound, received: Any) -> None:
        try:
            response = await method.function(received, call.context)
            payload = method.serialize(response)
        except Exception as exc:
            self._handler_failed(call, exc)
            return
        if not self._send(call, payload, True):
            await self._send_slowly(call, payload, True)

    def _handler_failed(self, call: Call, exc: Exception) -> None:
        """The method's handler aborted (the status it set on its context) or raised
        (UNKNOWN, in grpcio's words)."""
        if isinstance(exc, grpc.aio.AbortError):
            context = call.context
            self._end(call, context.code() or grpc.StatusCode.UNKNOWN, context.details())
            return
        log.error("gRPC call %s failed", call.stream_id, exc_info=exc)
        self._end(call, grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc)}: {exc}")

    async def _stream(self, call: Call) -> None:
        method = call.method
        assert method is not None
        context = call.context
        requests = call.requests(self._give_credit, self._message_failed)
        responses = method.function(requests, context)
        try:
            async for response in responses:
                payload = method.serialize(response)
                if not self._send(call, payload, False):
                    await self._send_slowly(call, payload, False)
                if call.finished:
                    return  # reset, by the client or for a stalled send
        except Exception as exc:
            self._handler_failed(call, exc)
            return
        finally:
            # The handler's own cleanup (its requests cancelled) runs now, not whenever the
            # generator is collected.
            aclose = getattr(responses, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        self._end(call, grpc.StatusCode.OK, "")

    def _abandon(self, call: Call, code: grpc.StatusCode, message: str) -> None:
        """End a streaming call from outside its handler (``CallContext.abort_now``), even
        while a response waits for window: its status if no message is half-sent (trailers
        may follow whole messages only), else a reset (RST_STREAM CANCEL). The handler is
        cancelled out of the write it waits in."""
        if call.finished or self._closed:
            return
        task = call.handler
        if call.partway:
            self._core.reset_stream(call.stream, f.CANCEL)
            self._finished(call)
        else:
            self._end(call, code, message)
        if task is not None:
            task.cancel()

    # -- sending --------------------------------------------------------------------------

    def _send(self, call: Call, payload: Serialized, last: bool) -> bool:
        """Write one message (and, if ``last``, the OK trailers) now if the windows allow.

        ``payload``: the message's bytes, or its pieces (a large one is written as they are:
        a tensor goes from its numpy buffer to the socket). False: nothing was written; send
        it with :meth:`_send_slowly`.
        """
        if call.finished or self._closed:
            return True
        if isinstance(payload, bytes):
            size = len(payload)
            pieces: list[Any] = [f.message_prefix(size), payload]
        else:
            views = [f.byte_view(piece) for piece in payload]
            size = sum(len(piece) for piece in views)
            if size <= SMALL_PAYLOAD:  # a few small pieces: one buffer is cheaper to write
                views = [b"".join(views)]
            pieces = [f.message_prefix(size), *views]
        if size > self._service.max_message:
            self._refuse_response(call, size)
            return True
        if self._writable is not None:
            return False
        if not self._core.send_message(call.stream, pieces, size + 5, not call.headers_sent, last):
            return False
        call.headers_sent = True
        if last:
            self._finished(call)
        return True

    async def _send_slowly(self, call: Call, payload: Serialized, last: bool) -> None:
        """Write one message in as many DATA frames as the client's windows and frame size
        need, waiting for window updates and for the transport's buffer to drain."""
        pieces = (
            [f.byte_view(payload)]
            if isinstance(payload, bytes)
            else list(map(f.byte_view, payload))
        )
        size = sum(len(piece) for piece in pieces)
        cursor = f.PieceCursor([memoryview(f.message_prefix(size)), *pieces])
        core = self._core
        stream = call.stream
        if not call.headers_sent:
            call.headers_sent = True
            core.send_response_headers(stream)
        left = size + 5
        turn = self._send_turn
        held = False
        # A client that gives no window back (or does not read) for the send timeout loses
        # the call: its response is not held for ever.
        timeout = self._service.limits.send_timeout or None
        deadline = None if timeout is None else self._loop.time() + timeout
        try:
            await turn.acquire()
            held = True
            while left:
                if call.finished or self._closed:
                    return
                if self._writable is not None:
                    if not await self._until(self._writable, deadline):
                        break
                    continue
                if core.stream_window(stream) <= 0:
                    # Only this stream is blocked: let the others' messages go meanwhile.
                    turn.release()
                    held = False
                    if not await self._until(self._window_growth(), deadline):
                        break
                    await turn.acquire()
                    held = True
                    continue
                room = min(core.send_room(stream), left)
                if room <= 0:
                    if not await self._until(self._window_growth(), deadline):
                        break
                    continue
                # Every frame the windows allow now, in one write.
                left -= room
                core.send_data(stream, room, cursor.take)
                call.partway = left > 0  # trailers may not follow until the message ends
                self._flush()
                if deadline is not None and timeout is not None:
                    deadline = self._loop.time() + timeout  # progress: the clock restarts
        finally:
            if held:
                turn.release()
        if left and not call.finished and not self._closed:
            log.info(
                "gRPC call %s reset: its client took no more of its response for %g s "
                "(--grpc-send-timeout)", call.stream_id, timeout,
            )  # fmt: skip
            self._core.reset_stream(stream, f.CANCEL)
            self._finished(call)
            return
        if last:
            self._end(call, grpc.StatusCode.OK, "")

    async def _until(self, waiter: asyncio.Future[None], deadline: float | None) -> bool:
        """Wait for ``waiter`` (shared by every sender: never cancelled here) until
        ``deadline``; False when the deadline passed first."""
        if deadline is None:
            await waiter
            return True
        try:
            await asyncio.wait_for(asyncio.shield(waiter), deadline - self._loop.time())
        except TimeoutError:
            return False
        return True

    def _window_growth(self) -> asyncio.Future[None]:
        """Done when the client gives window back (a WINDOW_UPDATE or SETTINGS)."""
        self._window_grew = self._window_grew or self._loop.create_future()
        return self._window_grew

    def _wake_senders(self) -> None:
        waiter = self._window_grew
        if waiter is not None:
            self._window_grew = None
            if not waiter.done():
                waiter.set_result(None)

    def _end(self, call: Call, code: grpc.StatusCode, message: str) -> None:
        """End ``call`` with ``code``: trailers, or a trailers-only response if nothing was
        sent yet."""
        if call.finished or self._closed:
            return
        block = f.status_fields(code.value[0], message)
        if not call.headers_sent:
            block = f.RESPONSE_HEADERS + block
            call.headers_sent = True
        self._core.send_headers(call.stream, block, end_stream=True)
        self._finished(call)

    def _trailers_only_http(self, call: Call, block: bytes) -> None:
        self._core.send_headers(call.stream, block, end_stream=True)
        self._finished(call)

    def _finished(self, call: Call) -> None:
        call.drop()
        if call.deadline_timer is not None:
            call.deadline_timer.cancel()
            call.deadline_timer = None
        self._calls.pop(call.stream_id, None)
        call.handler = None  # no cycle through a finished task's frames
        self._idle_timer()
        self._service.call_ended(self)

    def _refuse_message(self, call: Call, size: int) -> None:
        self._end(
            call, grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"Received message larger than max ({size} vs. {self._service.max_message})",
        )  # fmt: skip

    def _refuse_response(self, call: Call, size: int) -> None:
        self._end(
            call, grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"Sent message larger than max ({size} vs. {self._service.max_message})",
        )  # fmt: skip

    def _schedule_flush(self) -> None:
        """The core queued output: everything queued in one turn of the loop goes in one
        write (fewer system calls)."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        output = self._core.data_to_send()
        if output and not self._closed and self._transport is not None:
            self._transport.writelines(output)

    # -- ending ---------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        return not self._calls

    def goaway(self) -> None:
        """Refuse new calls; running ones finish (the server closes us once they have).

        As RFC 9113 6.8 advises: a first GOAWAY says no stream will be refused yet, and a
        PING follows; once its ACK is back, every call the client sent before reading the
        first GOAWAY has arrived, and the final GOAWAY names the last one.
        """
        if not self._core.going_away and not self._core.closing:
            self._core.start_drain()
            # A client that never answers the PING is not waited for long.
            self._loop.call_later(1.0, self._last_goaway)

    def _last_goaway(self) -> None:
        if not self._closed:
            self._core.final_goaway()
        if self.idle:
            self.close()

    @property
    def closing(self) -> bool:
        return self._core.closing

    def cancel_calls(self) -> None:
        """The drain is over: cancel every running call (the client sees CANCELLED)."""
        for call in list(self._calls.values()):
            if call.handler is not None:
                call.handler.cancel()
                call.handler = None
            call.drop()
        self._calls.clear()
        self._core.cancel_all()

    def close(self) -> None:
        self._flush()
        if self._transport is not None and not self._closed:
            self._transport.close()

    def _fail(self, event: h2_events.ConnectionTerminated) -> None:
        log.info("closing a gRPC connection: %s", event.why)
        self.cancel_calls()
        self.close()
