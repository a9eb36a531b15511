"""One client connection: an asyncio Protocol speaking HTTP/2 for gRPC, on the server's loop.

Frames are parsed by hand; DATA payloads go straight from each read into their call's message
(see :class:`~conveyor.server.grpc.h2.calls.Call`), other frames wait in a small buffer until
they are whole. Request headers are decoded by :mod:`~conveyor.server.grpc.h2.headers`;
responses use precomputed header blocks (:mod:`~conveyor.server.grpc.h2.frames`).

A unary call's handler starts once its request is whole; a streaming call's at its HEADERS,
reading requests as they arrive. Responses go out with ``transport.writelines`` in DATA
frames no bigger than the client's frame size and windows allow; a sender that runs out of
window, or finds the transport's buffer full, waits for the client.

One class, past the size a module usually has here: reading, flow control and sending share
the calls' table and the windows, and each step of the protocol is easier to check against
RFC 9113 beside the others than spread over mixins.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import grpc

from conveyor.errors import Unauthenticated
from conveyor.server.auth import OPEN_GRPC_METHODS, BearerAuth
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
from conveyor.server.grpc.h2.headers import HeaderBlockError, HeaderDecoder, RequestHeaders
from conveyor.server.grpc.service import Bound, Serialized


class Service(Protocol):
    """What a connection needs of the server it belongs to (``h2.server.GrpcService``)."""

    methods: dict[str, Bound]  # by path, "/inference.GRPCInferenceService/ModelInfer"
    max_message: int
    auth: BearerAuth | None
    draining: bool

    @property
    def connections(self) -> set[GrpcConnection]: ...

    def call_ended(self, connection: GrpcConnection) -> None: ...

    def connection_closed(self, connection: GrpcConnection) -> None: ...


log = logging.getLogger("conveyor.server.grpc")

# What we let clients send: a large window per stream (a 4 MiB message goes in one flight)
# and for the connection; the stream's is given back as its messages are read.
STREAM_WINDOW = 16 * 1024 * 1024
CONNECTION_WINDOW = 256 * 1024 * 1024
MAX_HEADER_BLOCK = 256 * 1024  # bytes of one (compressed) header block, CONTINUATIONs included
MAX_CONCURRENT_STREAMS = 4096
# Bytes of announced, not yet received messages a connection may hold buffers for (at least
# four of the largest messages allowed).
UNFINISHED_BYTES = 64 * 1024 * 1024
READ_SIZE = 256 * 1024  # the scratch buffer reads go into (but those into a message)
# A response in pieces up to this size is joined before it is written (cheaper than many
# small buffers); a larger one is written from its pieces, tensors uncopied.
SMALL_PAYLOAD = 64 * 1024
# The largest frame clients may send: DATA as large as HTTP/2 allows (fewer frames to parse
# for a big message; their payload is never held whole), other frames (held until whole)
# no larger than a header block.
MAX_FRAME = 2**24 - 1

SERVER_PREFACE = f.settings(
    {
        f.SETTINGS_MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS,
        f.SETTINGS_INITIAL_WINDOW_SIZE: STREAM_WINDOW,
        f.SETTINGS_MAX_HEADER_LIST_SIZE: MAX_HEADER_BLOCK,
        f.SETTINGS_MAX_FRAME_SIZE: MAX_FRAME,
        f.SETTINGS_ENABLE_PUSH: 0,
    }
) + f.window_update(0, CONNECTION_WINDOW - f.DEFAULT_WINDOW)

_INTERNAL = grpc.StatusCode.INTERNAL.value[0]


# What can be wrong with a request message as it arrives: each ends its call, not the
# connection.
MessageFailure = (
    MessageTooLarge,
    InflatedTooLarge,
    ReceiveBudgetSpent,
    UndecodableMessage,
    CompressedMessage,
)


class ConnectionError_(Exception):
    """The client broke the protocol: the connection ends with GOAWAY ``code``."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


class GrpcConnection(asyncio.BufferedProtocol):
    def __init__(self, service: Service) -> None:
        self._service = service
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._pending = b""  # an incomplete frame
        self._scratch = memoryview(bytearray(READ_SIZE))
        self._direct: Call | None = None  # the call whose message the last read went into
        self._preface = False
        self._decoder = HeaderDecoder(MAX_HEADER_BLOCK)
        # Several maximal messages may be in flight at once; past that, calls are refused.
        self._budget = ReceiveBudget(max(UNFINISHED_BYTES, 4 * service.max_message))
        self._calls: dict[int, Call] = {}
        self._last_stream = 0
        # DATA frame being read: its call (None: a closed stream's), bytes left, padding left.
        self._data_call: Call | None = None
        self._data_left = 0
        self._data_padding = 0
        self._data_end = False
        # A header block being continued: its stream, flags, bytes so far.
        self._headers_stream = 0
        self._headers_flags = 0
        self._headers_block = bytearray()
        # Sending: the client's windows and frame size.
        self._send_window = f.DEFAULT_WINDOW
        self._initial_send_window = f.DEFAULT_WINDOW
        self._max_frame = f.DEFAULT_MAX_FRAME
        self._window_grew: asyncio.Future[None] | None = None
        # Large messages go out one after another, not interleaved: the client completes
        # (and gives window back for) each in turn instead of holding parts of all of them
        # while the connection's window is spent. A message whose own stream has no window
        # steps aside for the others.
        self._send_turn = asyncio.Lock()
        self._writable: asyncio.Future[None] | None = None  # set while the transport is full
        self._connection_credit = 0
        # Frames queued this turn of the loop (one write for all: fewer system calls).
        self._output: list[Any] = []
        self._flush_scheduled = False
        self._going_away = False  # the first GOAWAY is sent
        self._closing = False  # the final GOAWAY is sent: new streams are refused
        self._closed = False

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        self._service.connections.add(self)
        self._write(SERVER_PREFACE)
        if self._service.draining:
            self.goaway()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._service.connections.discard(self)
        for call in self._calls.values():
            call.drop()
            if call.task is not None:
                call.task.cancel()
        self._calls.clear()
        self._wake_senders()
        self.resume_writing()  # a sender waiting for room sees the connection closed
        self._service.connection_closed(self)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        writable = self._writable
        self._writable = None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the next read goes: straight into a message's buffer while a DATA frame's
        payload fills one (the bytes are never copied again), else a scratch buffer."""
        call = self._data_call
        if self._data_left and call is not None and not call.finished:
            target = call.direct_buffer(self._data_left)
            if target is not None:
                self._direct = call
                return target
        self._direct = None
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        call = self._direct
        if call is None:
            self.data_received(bytes(self._scratch[:nbytes]))
            return
        self._direct = None
        self._data_left -= nbytes
        try:
            try:
                call.filled(nbytes)
            except MessageFailure as exc:
                self._message_failed(call, exc)
            if not self._data_left and not self._data_padding:
                self._data_done()
        except Exception:
            log.exception("gRPC connection failed")
            self._fail(f.INTERNAL_ERROR, "internal error")

    def data_received(self, data: bytes) -> None:
        try:
            self._receive(data)
        except ConnectionError_ as exc:
            self._fail(exc.code, str(exc))
        except Exception:
            log.exception("gRPC connection failed")
            self._fail(f.INTERNAL_ERROR, "internal error")

    # -- reading frames -------------------------------------------------------------------

    def _receive(self, data: bytes) -> None:
        if self._pending:
            data = self._pending + data
            self._pending = b""
        position, end = 0, len(data)
        if not self._preface:
            if end < len(f.PREFACE):
                if not f.PREFACE.startswith(data):
                    raise ConnectionError_(f.PROTOCOL_ERROR, "not an HTTP/2 client preface")
                self._pending = data
                return
            if not data.startswith(f.PREFACE):
                raise ConnectionError_(f.PROTOCOL_ERROR, "not an HTTP/2 client preface")
            self._preface = True
            position = len(f.PREFACE)
        while position < end:
            if self._data_left or self._data_padding:
                position = self._data_payload(data, position, end)
                continue
            if end - position < 9:
                break
            length, kind, flags, stream_id = f.parse_header(data, position)
            if length > (MAX_FRAME if kind == f.DATA else MAX_HEADER_BLOCK):
                raise ConnectionError_(f.FRAME_SIZE_ERROR, f"a frame of {length} bytes")
            if self._headers_stream and kind != f.CONTINUATION:
                raise ConnectionError_(f.PROTOCOL_ERROR, "a header block was not continued")
            if kind == f.DATA:
                padding = 0
                start = position + 9
                if flags & f.PADDED:
                    if end - start < 1:
                        break
                    padding = data[start]
                    start += 1
                    if padding >= length:
                        raise ConnectionError_(f.PROTOCOL_ERROR, "padding longer than the frame")
                    length -= 1 + padding
                position = start
                self._data_frame(stream_id, length, padding, bool(flags & f.END_STREAM))
                continue
            if end - position - 9 < length:
                break
            payload = data[position + 9 : position + 9 + length]
            position += 9 + length
            self._frame(kind, flags, stream_id, payload)
        if position < end:
            self._pending = data[position:]

    def _data_frame(self, stream_id: int, length: int, padding: int, end_stream: bool) -> None:
        frame_size = length + padding + (1 if padding else 0)
        self._connection_credit += frame_size
        if self._connection_credit >= CONNECTION_WINDOW // 4:
            self._write(f.window_update(0, self._connection_credit))
            self._connection_credit = 0
        if stream_id == 0:
            raise ConnectionError_(f.PROTOCOL_ERROR, "DATA on stream 0")
        call = self._calls.get(stream_id)
        if call is not None and call.remote_closed:
            call = None  # after END_STREAM: ignored (the stream is closed to the client)
        if call is not None:
            call.unread_credit += frame_size
        self._data_call = call
        self._data_left = length
        self._data_padding = padding
        self._data_end = end_stream
        if length == 0 and padding == 0:
            self._data_done()

    def _data_payload(self, data: bytes, position: int, end: int) -> int:
        if self._data_left:
            take = min(self._data_left, end - position)
            call = self._data_call
            if call is not None and not call.finished:
                try:
                    call.feed(data, position, position + take)
                except MessageFailure as exc:
                    self._message_failed(call, exc)
            self._data_left -= take
            position += take
        if not self._data_left and self._data_padding:
            skip = min(self._data_padding, end - position)
            self._data_padding -= skip
            position += skip
        if not self._data_left and not self._data_padding:
            self._data_done()
        return position

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

    def _data_done(self) -> None:
        call = self._data_call
        self._data_call = None
        if call is None or call.finished:
            return
        if self._data_end:
            self._remote_closed(call)
        elif call.unread_credit >= STREAM_WINDOW // 4 and len(call.messages) < UNREAD_MESSAGES:
            self._give_credit(call)

    def _give_credit(self, call: Call) -> None:
        """Give a stream's received bytes back to the client's window."""
        if call.remote_closed or call.finished or len(call.messages) >= UNREAD_MESSAGES:
            return
        if call.unread_credit >= STREAM_WINDOW // 4:
            self._write(f.window_update(call.stream_id, call.unread_credit))
            call.unread_credit = 0

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if kind == f.HEADERS:
            if stream_id == 0 or stream_id % 2 == 0:
                raise ConnectionError_(f.PROTOCOL_ERROR, f"HEADERS on stream {stream_id}")
            if flags & f.PADDED:
                pad = payload[0]
                payload = payload[1 : len(payload) - pad]
            if flags & f.PRIORITY_FLAG:
                payload = payload[5:]
            if flags & f.END_HEADERS:
                self._headers(stream_id, flags, payload)
            else:
                self._headers_stream = stream_id
                self._headers_flags = flags
                self._headers_block = bytearray(payload)
        elif kind == f.CONTINUATION:
            if stream_id != self._headers_stream or stream_id == 0:
                raise ConnectionError_(f.PROTOCOL_ERROR, "CONTINUATION of no header block")
            self._headers_block += payload
            if len(self._headers_block) > MAX_HEADER_BLOCK:
                raise ConnectionError_(f.PROTOCOL_ERROR, "a header block over the size limit")
            if flags & f.END_HEADERS:
                self._headers_stream = 0
                self._headers(stream_id, self._headers_flags, bytes(self._headers_block))
                self._headers_block = bytearray()
        elif kind == f.SETTINGS:
            if flags & f.ACK:
                return
            if len(payload) % 6:
                raise ConnectionError_(f.FRAME_SIZE_ERROR, "SETTINGS of a bad length")
            self._settings(f.parse_settings(payload))
        elif kind == f.PING:
            if len(payload) != 8:
                raise ConnectionError_(f.FRAME_SIZE_ERROR, "PING of a bad length")
            if not flags & f.ACK:
                self._write(f.frame_header(8, f.PING, f.ACK, 0) + payload)
            elif payload == _DRAIN_PING_DATA and self._going_away:
                self._last_goaway()
        elif kind == f.WINDOW_UPDATE:
            if len(payload) != 4:
                raise ConnectionError_(f.FRAME_SIZE_ERROR, "WINDOW_UPDATE of a bad length")
            increment = f.read_u32(payload) & 0x7FFF_FFFF
            if stream_id == 0:
                self._send_window += increment
            else:
                call = self._calls.get(stream_id)
                if call is None:
                    return
                call.send_window += increment
            self._wake_senders()
        elif kind == f.RST_STREAM:
            call = self._calls.pop(stream_id, None)
            if call is not None:
                call.drop()  # the client cancelled it: nothing more is sent
                if call.task is not None:
                    call.task.cancel()
                self._wake_senders()
                self._service.call_ended(self)
        elif kind == f.GOAWAY:
            self.goaway()  # the client goes: finish what runs, then close
        elif kind == f.PUSH_PROMISE:
            raise ConnectionError_(f.PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        # PRIORITY and unknown frame types are ignored, as RFC 9113 says.

    def _settings(self, values: list[tuple[int, int]]) -> None:
        for key, value in values:
            if key == f.SETTINGS_INITIAL_WINDOW_SIZE:
                if value > f.MAX_WINDOW:
                    raise ConnectionError_(f.FLOW_CONTROL_ERROR, "initial window too large")
                delta = value - self._initial_send_window
                self._initial_send_window = value
                for call in self._calls.values():
                    call.send_window += delta
            elif key == f.SETTINGS_MAX_FRAME_SIZE:
                if not f.DEFAULT_MAX_FRAME <= value <= 2**24 - 1:
                    raise ConnectionError_(f.PROTOCOL_ERROR, "max frame size out of range")
                self._max_frame = value
        self._write(f.SETTINGS_ACK)
        self._wake_senders()

    # -- calls ----------------------------------------------------------------------------

    def _headers(self, stream_id: int, flags: int, block: bytes) -> None:
        try:
            fields = self._decoder.decode(block)
        except HeaderBlockError as exc:
            raise ConnectionError_(f.COMPRESSION_ERROR, str(exc)) from None
        call = self._calls.get(stream_id)
        if call is not None:  # trailers from the client: only END_STREAM matters
            if flags & f.END_STREAM:
                self._remote_closed(call)
            return
        if stream_id <= self._last_stream:
            return  # a stream that ended already
        if self._closing:
            self._write(f.rst_stream(stream_id, f.REFUSED_STREAM))
            return
        self._last_stream = stream_id
        self._open(stream_id, fields, bool(flags & f.END_STREAM))

    def _open(self, stream_id: int, fields: list[tuple[bytes, bytes]], ended: bool) -> None:
        head = RequestHeaders(fields)
        service = self._service
        method = service.methods.get(head.path)
        context = CallContext(head.metadata, head.timeout)
        call = Call(
            stream_id, method, context, self._initial_send_window, service.max_message,
            self._budget,
        )  # fmt: skip
        call.remote_closed = ended
        self._calls[stream_id] = call
        if not head.content_type.startswith(b"application/grpc"):
            self._trailers_only_http(call, f.UNSUPPORTED_MEDIA_TYPE)
            return
        if method is None:
            self._end(call, grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
            return
        if head.encoding and head.encoding != b"identity":
            wbits = INFLATE_WBITS.get(head.encoding)
            if wbits is None:
                encoding = head.encoding.decode("latin-1")
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
        if head.timeout is not None:
            call.deadline_timer = self._loop.call_later(head.timeout, self._deadline_passed, call)
        if method.streaming:
            call.task = self._loop.create_task(self._stream(call))
        elif ended:
            self._end(call, grpc.StatusCode.INTERNAL, "the call sent no request message")

    def _deadline_passed(self, call: Call) -> None:
        """The client's ``grpc-timeout`` ran out: the call is cancelled, as grpcio does."""
        call.deadline_timer = None
        if call.finished:
            return
        if call.task is not None:
            call.task.cancel()
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
        call.task = self._loop.create_task(self._unary(call))

    async def _unary(self, call: Call) -> None:
        method = call.method
        assert method is not None
        context = call.context
        try:
            response = await method.function(method.deserialize(call.messages.popleft()), context)
            payload = method.serialize(response)
        except grpc.aio.AbortError:
            self._end(call, context.code() or grpc.StatusCode.UNKNOWN, context.details())
            return
        except Exception as exc:
            log.exception("gRPC call %s failed", call.stream_id)
            self._end(call, grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc)}: {exc}")
            return
        if not self._send(call, payload, True):
            await self._send_slowly(call, payload, True)

    async def _stream(self, call: Call) -> None:
        method = call.method
        assert method is not None
        context = call.context
        try:
            responses = method.function(call.requests(self._give_credit), context)
            async for response in responses:
                payload = method.serialize(response)
                if not self._send(call, payload, False):
                    await self._send_slowly(call, payload, False)
        except grpc.aio.AbortError:
            self._end(call, context.code() or grpc.StatusCode.UNKNOWN, context.details())
            return
        except Exception as exc:
            log.exception("gRPC stream %s failed", call.stream_id)
            self._end(call, grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc)}: {exc}")
            return
        self._end(call, grpc.StatusCode.OK, "")

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
            pieces: list[Any] = [payload]
        else:
            pieces = [f.byte_view(piece) for piece in payload]
            size = sum(len(piece) for piece in pieces)
            if size <= SMALL_PAYLOAD:  # a few small pieces: one buffer is cheaper to write
                pieces = [b"".join(pieces)]
        if size > self._service.max_message:
            self._refuse_response(call, size)
            return True
        framed = size + 5
        if (
            framed > self._max_frame
            or framed > self._send_window
            or framed > call.send_window
            or self._writable is not None
        ):
            return False
        self._send_window -= framed
        call.send_window -= framed
        parts: list[Any] = []
        if not call.headers_sent:
            call.headers_sent = True
            parts.append(_RESPONSE_HEADERS_FRAME(call.stream_id))
        parts.append(f.frame_header(framed, f.DATA, 0, call.stream_id))
        parts.append(f.message_prefix(size))
        parts += pieces
        if last:
            parts.append(f.frame_header(len(f.OK_TRAILERS), f.HEADERS, _END, call.stream_id))
            parts.append(f.OK_TRAILERS)
        self._output += parts
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
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
        if not call.headers_sent:
            call.headers_sent = True
            self._write(_RESPONSE_HEADERS_FRAME(call.stream_id))
        left = size + 5
        stream_id = call.stream_id
        turn = self._send_turn
        held = False
        try:
            await turn.acquire()
            held = True
            while left:
                if call.finished or self._closed:
                    return
                if self._writable is not None:
                    await self._writable
                    continue
                if call.send_window <= 0:
                    # Only this stream is blocked: let the others' messages go meanwhile.
                    turn.release()
                    held = False
                    await self._window_growth()
                    await turn.acquire()
                    held = True
                    continue
                room = min(self._send_window, call.send_window, left)
                if room <= 0:
                    await self._window_growth()
                    continue
                # Every frame the windows allow now, in one write.
                self._send_window -= room
                call.send_window -= room
                left -= room
                parts: list[Any] = []
                while room:
                    chunk = min(room, self._max_frame)
                    parts.append(f.frame_header(chunk, f.DATA, 0, stream_id))
                    parts += cursor.take(chunk)
                    room -= chunk
                self._output += parts
                self._flush()
        finally:
            if held:
                turn.release()
        if last:
            self._end(call, grpc.StatusCode.OK, "")

    async def _window_growth(self) -> None:
        """Until the client gives window back (a WINDOW_UPDATE or SETTINGS)."""
        self._window_grew = self._window_grew or self._loop.create_future()
        await self._window_grew

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
        self._write_header_block(call.stream_id, block, end_stream=True)
        self._finished(call)

    def _trailers_only_http(self, call: Call, block: bytes) -> None:
        self._write_header_block(call.stream_id, block, end_stream=True)
        self._finished(call)

    def _finished(self, call: Call) -> None:
        call.drop()
        if call.deadline_timer is not None:
            call.deadline_timer.cancel()
        self._calls.pop(call.stream_id, None)
        if not call.remote_closed:
            # The client may still be sending; tell it to stop (RFC 9113 8.1).
            self._write(f.rst_stream(call.stream_id, f.NO_ERROR))
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

    def _write_header_block(self, stream_id: int, block: bytes, *, end_stream: bool) -> None:
        """``block`` as HEADERS plus CONTINUATION frames within the client's frame size."""
        limit = self._max_frame
        first, rest = block[:limit], block[limit:]
        flags = (f.END_STREAM if end_stream else 0) | (0 if rest else f.END_HEADERS)
        parts = [f.frame_header(len(first), f.HEADERS, flags, stream_id), first]
        while rest:
            chunk, rest = rest[:limit], rest[limit:]
            flags = 0 if rest else f.END_HEADERS
            parts += [f.frame_header(len(chunk), f.CONTINUATION, flags, stream_id), chunk]
        self._write(b"".join(parts))

    def _write(self, data: bytes) -> None:
        """Queue ``data``; everything queued in one turn of the loop goes in one write."""
        self._output.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        output = self._output
        if output:
            self._output = []
            if not self._closed and self._transport is not None:
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
        if not self._going_away and not self._closing:
            self._going_away = True
            self._write(f.goaway(f.MAX_WINDOW, f.NO_ERROR) + _DRAIN_PING)
            # A client that never answers the PING is not waited for long.
            self._loop.call_later(1.0, self._last_goaway)

    def _last_goaway(self) -> None:
        if not self._closing and not self._closed:
            self._closing = True
            self._write(f.goaway(self._last_stream, f.NO_ERROR))
        if self.idle:
            self.close()

    @property
    def closing(self) -> bool:
        return self._closing

    def cancel_calls(self) -> None:
        """The drain is over: cancel every running call (the client sees CANCELLED)."""
        for call in list(self._calls.values()):
            if call.task is not None:
                call.task.cancel()
            self._write(f.rst_stream(call.stream_id, f.CANCEL))
            call.drop()
        self._calls.clear()

    def close(self) -> None:
        self._flush()
        if self._transport is not None and not self._closed:
            self._transport.close()

    def _fail(self, code: int, why: str) -> None:
        log.info("closing a gRPC connection: %s", why)
        if self._preface:
            self._write(f.goaway(self._last_stream, code, why.encode()[:256]))
        self._closing = True
        self.cancel_calls()
        self.close()
        self._pending = b""
        self._data_left = self._data_padding = 0


_END = f.END_STREAM | f.END_HEADERS
_DRAIN_PING_DATA = b"draining"
_DRAIN_PING = f.frame_header(8, f.PING, 0, 0) + _DRAIN_PING_DATA


def _RESPONSE_HEADERS_FRAME(stream_id: int) -> bytes:
    return f.frame_header(len(f.RESPONSE_HEADERS), f.HEADERS, f.END_HEADERS, stream_id) + (
        f.RESPONSE_HEADERS
    )
