"""The server's HTTP/1.1, straight on httptools and asyncio: the V2 port and the metrics port.

Why not ASGI: on the infer hot path uvicorn's ASGI layer (scope and message dicts, a task,
an event per body read, header validation per send) cost more than everything else the
server does for a ``tiny`` request. Here an infer request is parsed by httptools' callbacks,
decoded and submitted to the engine inside ``data_received``, and answered from a
callback when the engine's future completes: no task, no coroutine, one write. Other
routes run as a task through ``routes.handle``, as the ASGI app (``asgi.py``) runs them
for users who mount Conveyor in their own ASGI server.

HTTP handled here: keep-alive (HTTP/1.1 default, HTTP/1.0 on request), pipelined
requests (answered in order, one at a time), chunked request bodies (httptools decodes
them), ``Expect: 100-continue``, HEAD (no body), body limits before reading, a cap on the
request head size, write back-pressure, idle keep-alive timeout, and a graceful stop that
lets in-flight requests finish. Malformed HTTP gets 400 and the connection is closed.

Bodies are read without joining: a body whose Content-Length is at least ``_DIRECT_BODY``
is received straight into one buffer allocated for it (``asyncio.BufferedProtocol``; the
socket reads into it, httptools parses only the head), placed so that the first tensor after
the JSON header starts 64-byte aligned. Infer responses are written as the head, the JSON
header and each output tensor's own buffer, never joined; large buffers are handed to the
transport as memoryviews, so a partly sent one is kept as a slice, not copied.

Slow senders cannot hold a connection: the request line and headers must arrive within
``header_timeout`` of their first byte, and a body may not stall for ``body_timeout``;
past either the client gets 408 and is disconnected. With a bearer token configured, a
request without it is refused (401) as soon as its headers are read: its body is never
read.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from email.utils import formatdate
from typing import Protocol, runtime_checkable
from urllib.parse import unquote

import httptools
import numpy as np

from conveyor.errors import (
    InvalidInput,
    MethodNotAllowed,
    RequestTimeout,
    Unauthenticated,
)
from conveyor.protocol.binary import BytesLike, Chunk
from conveyor.server.access_log import AccessLog
from conveyor.server.auth import CHALLENGE, OPEN_HTTP_PATHS, BearerAuth
from conveyor.server.frontend import bind, front_end_label
from conveyor.server.http import body as bodies
from conveyor.server.http.errors import error_response
from conveyor.server.http.routes import (
    JSON,
    ChunkedReply,
    Headers,
    PendingInfer,
    Reply,
)
from conveyor.server.settings import (
    DEFAULT_HTTP_BODY_TIMEOUT_S,
    DEFAULT_HTTP_HEADER_TIMEOUT_S,
    DEFAULT_HTTP_KEEP_ALIVE_S,
    DEFAULT_LISTEN_BACKLOG,
)

log = logging.getLogger("conveyor.http")

MAX_HEAD_BYTES = 64 * 1024  # request line + headers
KEEP_ALIVE_SECONDS = DEFAULT_HTTP_KEEP_ALIVE_S
HEADER_TIMEOUT_SECONDS = DEFAULT_HTTP_HEADER_TIMEOUT_S
BODY_TIMEOUT_SECONDS = DEFAULT_HTTP_BODY_TIMEOUT_S
BACKLOG = DEFAULT_LISTEN_BACKLOG
_LARGE_BODY = 64 * 1024  # above this, head and body are written separately (no join copy)
# Bodies declared at least this long are read into their own buffer (smaller ones through
# the parser's callbacks, which cost less than a buffer switch for a few KiB).
_DIRECT_BODY = 64 * 1024
# Where socket reads go while no body is read directly. One per front end: every read is
# parsed (and copied out by httptools' callbacks) before the next read, on the loop thread.
_SCRATCH_BYTES = 256 * 1024
_ALIGN = 64  # the first tensor of a directly read body starts at this alignment
# Pipelined requests parsed ahead of their turn; past this, stop reading the connection.
# (Pausing costs syscalls, so it is not done per request.)
_MAX_PIPELINED = 4
# A streamed reply stops when this much of it waits unsent (a client that stopped reading).
_STREAM_BACKLOG = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class _Framing:
    """How a body written as it is produced is delimited on the wire."""

    end_of_head: bytes  # the head's last header line and its blank line
    frame: Callable[[bytes], bytes]  # one chunk as written
    last_chunk: bytes  # written after the last chunk (empty: the close ends the body)
    # A client reading slower than the chunks come: True, it is cut off (the stream ends);
    # False, the writer waits for the socket to drain (a slow client slows the model).
    cuts_slow_clients: bool
    ends_on_shutdown: bool  # the server's stop ends it rather than waiting for its end


# generate_stream: chunked transfer encoding; the connection stays open for more requests.
_CHUNKED = _Framing(
    b"transfer-encoding: chunked\r\n\r\n",
    lambda chunk: b"%x\r\n%s\r\n" % (len(chunk), chunk),
    b"0\r\n\r\n",
    cuts_slow_clients=False,
    ends_on_shutdown=False,
)
# Dashboard events: no length, no chunking; the body ends when the connection closes.
_UNTIL_CLOSE = _Framing(
    b"connection: close\r\n\r\n",
    lambda chunk: chunk,
    b"",
    cuts_slow_clients=True,
    ends_on_shutdown=True,
)

_REASONS = {
    200: b"OK", 400: b"Bad Request", 401: b"Unauthorized", 404: b"Not Found",
    405: b"Method Not Allowed", 408: b"Request Timeout", 500: b"Internal Server Error",
    503: b"Service Unavailable",
}  # fmt: skip
_STATUS_LINES = {code: b"HTTP/1.1 %d %s\r\n" % (code, reason) for code, reason in _REASONS.items()}
_INTERESTING = frozenset(
    (
        b"content-length",
        b"transfer-encoding",
        b"content-encoding",
        b"accept-encoding",
        b"inference-header-content-length",
        b"traceparent",
        b"expect",
        b"authorization",
    )
)


# A reply whose body is written until the connection closes (server-sent events): no
# Content-Length and no chunked encoding; the connection closes when the iterator ends, or
# when the server stops. (A ChunkedReply keeps the connection open after its last chunk.)
UntilCloseReply = tuple[int, AsyncIterator[bytes], Headers]


class Routes(Protocol):
    """What an :class:`HTTPToolsFrontEnd` serves (``V2Routes``, the metrics port's routes)."""

    async def handle(
        self,
        method: str,
        path: str,
        read_body: Callable[[], Awaitable[bytes]],
        header_length: bytes | None,
    ) -> Reply | ChunkedReply | UntilCloseReply: ...


@runtime_checkable
class InferRoutes(Routes, Protocol):
    """Routes whose infer requests start from the parser's callback, with no task."""

    tracer: TracingSwitch

    def begin_infer(
        self,
        path: str,
        body: BytesLike,
        header_length: bytes | None,
        traceparent: bytes | None = None,
        recv_start: int = 0,
    ) -> PendingInfer: ...


class TracingSwitch(Protocol):
    """Whether any request may be traced (the Tracer's ``on``): read once per request."""

    on: bool


class _Untraced:
    on = False


class _Request:
    __slots__ = (
        "accept",
        "authorization",
        "body",
        "chunked",
        "direct",
        "encoding",
        "error",
        "expect_continue",
        "filled",
        "header_length",
        "keep_alive",
        "length",
        "method",
        "path",
        "recv_start",
        "request_id",
        "size",
        "started",
        "traceparent",
    )

    def __init__(self) -> None:
        self.method = ""
        self.path = ""
        self.body: list[bytes] = []
        self.size = 0
        self.encoding: bytes | None = None
        self.accept: bytes | None = None
        self.authorization: bytes | None = None
        self.header_length: bytes | None = None
        self.traceparent: bytes | None = None  # W3C trace context, for tracing
        self.length: int | None = None  # Content-Length
        self.chunked = False  # a Transfer-Encoding header was sent
        self.direct: memoryview | None = None  # the body's own buffer, when read directly
        self.filled = 0  # bytes of ``direct`` received
        self.keep_alive = True
        self.expect_continue = False
        self.error: Exception | None = None
        self.started = 0.0  # perf_counter at its first byte, only while the access log is on
        self.recv_start = 0  # perf_counter_ns at its first byte, only while tracing is on
        self.request_id: str | None = None  # an infer request's id, for the access log

    def read_directly(self, length: int) -> None:
        """Receive the body into one buffer of its own, its binary tail aligned."""
        header = self.header_length
        at = int(header) if header is not None and header.strip().isdigit() else 0
        buffer = bytearray(length + _ALIGN)
        # The buffer's address, without ctypes: numpy reads it from the buffer protocol.
        address = int(np.frombuffer(buffer, np.uint8).ctypes.data)
        offset = -(address + at) % _ALIGN if at <= length else 0
        self.direct = memoryview(buffer)[offset : offset + length]


class HTTPProtocol(asyncio.BufferedProtocol):
    """One client connection."""

    def __init__(self, front_end: HTTPToolsFrontEnd) -> None:
        self._front_end = front_end
        self._routes = front_end.routes
        self._access = front_end.access
        self._begin_infer = front_end.begin_infer
        self._tracer = front_end.tracer
        self._limit = front_end.max_body_bytes
        self._loop = front_end.loop
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._head_bytes = 0
        self._current: _Request | None = None  # being parsed
        self._direct: _Request | None = None  # its body is being read into its own buffer
        self._scratch = front_end.scratch
        self._queue: collections.deque[_Request] = collections.deque()  # parsed, waiting
        self._busy = False  # a request is being handled (responses go out in order)
        self._inflight: PendingInfer | None = None
        self._task: asyncio.Task[None] | None = None
        self._streaming = False  # a UntilCloseReply is being written: stop() cuts it short
        self._discarding = False  # after a fatal request error: ignore the rest of the input
        self._closing = False  # close once the current response is written
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None  # a streamed reply waits on it
        self._read_paused = False
        self.idle_since: float | None = time.monotonic()
        # While a request is being read: when the client must have sent more (or be cut off).
        self.read_deadline: float | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a stream gets a Transport
        self._front_end.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._front_end.connections.discard(self)
        self._transport = None
        if self._inflight is not None:
            self._inflight.future.cancel()  # nobody will read it: drop it if still queued
        if self._task is not None:
            self._task.cancel()

    def get_buffer(self, sizehint: int) -> memoryview:
        request = self._direct
        if request is not None:
            assert request.direct is not None
            return request.direct[request.filled :]  # never past this body's end
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        request = self._direct
        if request is None:
            self.data_received(self._scratch[:nbytes])
            return
        request.filled += nbytes
        self.read_deadline = time.monotonic() + self._front_end.body_timeout
        assert request.direct is not None
        if request.filled == len(request.direct):
            # httptools never saw this body: a fresh parser starts at the next request.
            self._direct = None
            self._parser = httptools.HttpRequestParser(self)
            self.on_message_complete()

    def data_received(self, data: BytesLike) -> None:
        if self._discarding:
            return
        self.idle_since = None
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fatal(InvalidInput("protocol upgrades (websockets, CONNECT) are not supported"))
            return
        except httptools.HttpParserError as exc:
            self._fatal(InvalidInput(f"malformed HTTP request: {exc}"))
            return
        current = self._current
        if current is not None and current.direct is not None and not self._discarding:
            self._direct = current  # the rest of its body goes straight into its buffer

    def pause_writing(self) -> None:
        # The client reads slower than we answer: stop reading its requests until it catches up.
        self._write_paused = True
        self._pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._maybe_resume_reading()

    def _pause_reading(self) -> None:
        if not self._read_paused and self._transport is not None:
            self._read_paused = True
            self._transport.pause_reading()

    def _maybe_resume_reading(self) -> None:
        if (
            self._read_paused
            and not self._write_paused
            and not self._discarding
            and len(self._queue) < _MAX_PIPELINED
            and self._transport is not None
        ):
            self._read_paused = False
            self._transport.resume_reading()

    # -- httptools callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.read_deadline = time.monotonic() + self._front_end.header_timeout
        self._current = _Request()
        if self._access.enabled:  # the access log's one check per request
            self._current.started = time.perf_counter()
        if self._tracer.on:  # tracing's one check per request (HTTP_RECV_START)
            self._current.recv_start = time.perf_counter_ns()
        self._url = b""
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._head_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        request = self._current
        assert request is not None
        self._head_bytes += len(name) + len(value)
        if self._head_bytes > MAX_HEAD_BYTES and request.error is None:
            request.error = InvalidInput(f"request head is over {MAX_HEAD_BYTES} bytes")
        name = name.lower()
        if name not in _INTERESTING:
            return
        if name == b"inference-header-content-length":
            request.header_length = value
        elif name == b"content-length":
            try:
                request.length = bodies.declared_length(value, self._limit)
            except InvalidInput as exc:
                request.error = exc
        elif name == b"content-encoding":
            request.encoding = value
        elif name == b"transfer-encoding":
            request.chunked = True
        elif name == b"accept-encoding":
            request.accept = value
        elif name == b"expect" and value.lower() == b"100-continue":
            request.expect_continue = True
        elif name == b"authorization":
            request.authorization = value
        elif name == b"traceparent":
            request.traceparent = value

    def on_headers_complete(self) -> None:
        request = self._current
        assert request is not None
        request.method = self._parser.get_method().decode("ascii", "replace")
        request.keep_alive = self._parser.should_keep_alive()
        url = self._url
        if b"?" in url or b"#" in url:
            url = httptools.parse_url(url).path or b"/"
        path = url.decode("latin-1")
        request.path = unquote(path) if "%" in path else path
        auth = self._front_end.auth
        if auth is not None and request.path not in self._front_end.open_paths:
            try:
                auth.check(request.authorization)
            except Unauthenticated as exc:
                request.error = exc  # first: a stranger learns nothing else, not even limits
        self.read_deadline = time.monotonic() + self._front_end.body_timeout
        if request.error is not None:
            # Refuse now (e.g. Content-Length over the limit): never read that body.
            self._reject(request)
            return
        if request.expect_continue and self._transport is not None:
            self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # the body is acceptable
        length = request.length
        if length is not None and length >= _DIRECT_BODY and not request.chunked:
            request.read_directly(length)

    def on_body(self, data: bytes) -> None:
        request = self._current
        if request is None or request.error is not None:
            return
        request.size += len(data)
        self.read_deadline = time.monotonic() + self._front_end.body_timeout
        if request.size > self._limit:
            request.error = bodies.too_large(f"more than {self._limit} bytes", self._limit)
            self._reject(request)
            return
        if request.direct is not None:  # the part of the body that came with the head
            request.direct[request.filled : request.size] = data
            request.filled = request.size
            return
        request.body.append(data)

    def on_message_complete(self) -> None:
        self.read_deadline = None
        request = self._current
        self._current = None
        if request is None or self._discarding:
            return
        self._queue.append(request)
        if not self._busy:
            self._next()
        elif len(self._queue) >= _MAX_PIPELINED:
            self._pause_reading()

    # -- handling -----------------------------------------------------------------------

    def _reject(self, request: _Request) -> None:
        """A request that must not be read further: answer it (in order) and close."""
        self._discarding = True
        self._current = None
        self._direct = None
        self.read_deadline = None
        request.keep_alive = False
        self._pause_reading()
        self._queue.append(request)
        if not self._busy:
            self._next()

    def _fatal(self, error: Exception) -> None:
        request = self._current or _Request()
        request.error = error
        request.method = request.method or "GET"
        self._reject(request)

    def _next(self) -> None:
        # Take the next parsed request; its answer (now or from a callback) calls us again.
        while not self._busy and self._queue and self._transport is not None:
            request = self._queue.popleft()
            self._busy = True  # one request at a time per connection, answered in order
            self._handle(request)

    def _handle(self, request: _Request) -> None:
        try:
            if request.error is not None:
                raise request.error
            body: BytesLike
            if request.direct is not None:
                body = request.direct
            else:
                body = b"".join(request.body) if len(request.body) != 1 else request.body[0]
            if request.encoding is not None:
                body = bodies.decompress(body, request.encoding, self._limit)
            infer = self._begin_infer
            if infer is not None and request.method == "POST" and request.path.endswith("/infer"):
                pending = infer(
                    request.path,
                    body,
                    request.header_length,
                    request.traceparent,
                    request.recv_start,
                )
                self._inflight = pending
                # The callback finds ``pending`` in ``_inflight`` (one request at a time per
                # connection) rather than holding it: future -> callback -> pending -> future
                # would be a cycle keeping the results (outputs in a client's shared-memory
                # region are views of it) alive until the garbage collector runs.
                pending.future.add_done_callback(
                    lambda _: self._loop.call_soon_threadsafe(self._infer_done, request)
                )
                return
            self._task = self._loop.create_task(self._route(request, body))
        except Exception as exc:
            self._respond(request, *self._error(exc))

    def _infer_done(self, request: _Request) -> None:
        pending, self._inflight = self._inflight, None
        if self._transport is None or pending is None:
            return
        if request.started:
            request.request_id = pending.request.id
        trace = pending.trace
        try:
            status, body, headers = pending.reply_parts(pending.future.result())
        except Exception as exc:  # the engine's error, or cancelled
            status, error_body, headers = self._error(exc)
            body = [error_body]
            if trace is not None:
                pending.finish_trace()
                trace = None
        if trace is None:
            self._respond(request, status, body, headers)
            return
        # Traced: HTTP_SEND_START as the answer goes to the transport, HTTP_SEND_END once
        # the transport took it (written to the socket, or buffered by the transport).
        trace.send_start = time.perf_counter_ns()
        self._respond(request, status, body, headers)
        pending.finish_trace()

    async def _route(self, request: _Request, body: BytesLike) -> None:
        async def read_body() -> bytes:
            # Only infer bodies stay views; other routes are rare and take bytes.
            return body if isinstance(body, bytes) else bytes(body)

        reply: Reply | ChunkedReply | UntilCloseReply
        try:
            reply = await self._routes.handle(
                request.method, request.path, read_body, request.header_length
            )
        except Exception as exc:
            reply = self._error(exc)
        if isinstance(reply, ChunkedReply):  # a chunked body (generate_stream)
            try:
                written = await self._write_stream(
                    request, reply.status, reply.headers, reply.chunks, _CHUNKED
                )
                if written and self._transport is not None:
                    if request.started:
                        self._log_access(request, reply.status)
                    self._finish_response(self._transport, request.keep_alive and not self._closing)
            finally:
                reply.close()  # the body ended, or the client went away: stop producing
            self._task = None
            return
        if not isinstance(reply[1], bytes | list | tuple):  # close-delimited (dashboard events)
            await self._stream_until_close(request, reply)
            return
        self._task = None
        if self._transport is not None:
            self._respond(request, *reply)

    async def _stream_until_close(self, request: _Request, reply: UntilCloseReply) -> None:
        """A close-delimited stream (dashboard events): the connection serves nothing after
        it, and the server's stop cuts it short."""
        status, chunks, headers = reply
        self._streaming = True
        try:
            await self._write_stream(request, status, headers, chunks, _UNTIL_CLOSE)
        except asyncio.CancelledError:
            pass  # the client left, or the server stops
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
            self._task = None
            self._streaming = False
            self._busy = False
            if self._transport is not None:
                self._transport.close()

    async def _write_stream(
        self,
        request: _Request,
        status: int,
        headers: Headers,
        chunks: AsyncIterator[bytes],
        framing: _Framing,
    ) -> bool:
        """Write the head, then each chunk as the iterator yields it, framed as ``framing``
        says; True once the whole body is written (the caller then ends the response)."""
        transport = self._transport
        if transport is None or (framing.ends_on_shutdown and self._closing):
            return False
        head: list[Chunk] = [
            _STATUS_LINES.get(status) or b"HTTP/1.1 %d X\r\n" % status,
            self._front_end.date,
        ]
        for name, value in headers:
            head += (name, b": ", value, b"\r\n")
        head.append(framing.end_of_head)
        transport.write(b"".join(head))  # type: ignore[arg-type]  # all bytes here
        if request.method == "HEAD":
            return True  # a head and no body
        async for chunk in chunks:
            if self._transport is None or (framing.ends_on_shutdown and self._closing):
                return False
            if framing.cuts_slow_clients:
                if transport.get_write_buffer_size() > _STREAM_BACKLOG:
                    return False
                transport.write(framing.frame(chunk))
                continue
            transport.write(framing.frame(chunk))
            while self._write_paused and self._transport is not None:
                self._drained = self._loop.create_future()
                await self._drained
        if self._transport is None:
            return False
        if framing.last_chunk:
            transport.write(framing.last_chunk)
        return True

    @staticmethod
    def _error(exc: BaseException) -> Reply:
        if isinstance(exc, asyncio.CancelledError):
            exc = InvalidInput("the request was cancelled")
        status, body = error_response(exc)
        if isinstance(exc, RequestTimeout):
            status = 408  # a transport matter, not a kind the engine knows
        elif isinstance(exc, MethodNotAllowed):
            return 405, body, [*JSON, (b"allow", ", ".join(exc.allow).encode())]
        return status, body, JSON

    def _respond(
        self, request: _Request, status: int, body: bytes | Sequence[Chunk], headers: Headers
    ) -> None:
        transport = self._transport
        if transport is None:
            return
        if isinstance(body, bytes):
            parts: Sequence[Chunk] = (body,)
            length = len(body)
        else:
            parts = body
            length = sum(_nbytes(part) for part in parts)
        encoding = None
        if request.accept is not None and length >= bodies.COMPRESS_MIN_BYTES:
            joined = b"".join(parts)  # type: ignore[arg-type]  # ndarray is a Buffer
            compressed, encoding = bodies.maybe_compress(
                request.path, status, joined, request.accept
            )
            parts, length = (compressed,), len(compressed)
        keep_alive = request.keep_alive and not self._closing
        head: list[Chunk] = [
            _STATUS_LINES.get(status) or b"HTTP/1.1 %d X\r\n" % status,
            self._front_end.date,
        ]
        for name, value in headers:
            head += (name, b": ", value, b"\r\n")
        if encoding is not None:
            head.append(b"content-encoding: " + encoding + b"\r\n")
        head.append(b"content-length: %d\r\n" % length)
        if status == 401:
            head.append(b"www-authenticate: " + CHALLENGE + b"\r\n")
        if not keep_alive:
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        if request.method == "HEAD":
            transport.write(b"".join(head))  # type: ignore[arg-type]  # ndarray is a Buffer
        elif length < _LARGE_BODY:
            head += parts
            transport.write(b"".join(head))  # type: ignore[arg-type]  # ndarray is a Buffer
        else:
            _write_parts(transport, head, parts)
        if request.started:
            self._log_access(request, status)
        self._finish_response(transport, keep_alive)

    def _log_access(self, request: _Request, status: int) -> None:
        seconds = time.perf_counter() - request.started
        self._access.http(request.method, request.path, status, seconds, request.request_id)

    def _finish_response(self, transport: asyncio.Transport, keep_alive: bool) -> None:
        """A response is written whole: close, or go on to the next pipelined request, or
        wait idle for one."""
        self._busy = False
        if not keep_alive:
            transport.close()
            return
        if self._queue:
            self._next()
        else:
            self.idle_since = time.monotonic()
        self._maybe_resume_reading()

    # -- front-end control --------------------------------------------------------------

    def shutdown(self) -> None:
        """Close when idle; otherwise after the response in progress."""
        self._closing = True
        if self._streaming and self._task is not None:
            self._task.cancel()  # an endless stream would hold the graceful stop to its limit
            return
        idle = not self._busy and not self._queue and self._current is None
        if idle and self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def check_read_timeout(self, now: float) -> None:
        """Cut off a client that stalled mid-request (408, then close)."""
        deadline = self.read_deadline
        if deadline is None or now < deadline or self._read_paused or self._discarding:
            return  # not reading a request, in time, or we are the ones not reading
        in_head = self._current is not None and not self._current.method
        what = "its headers" if in_head else "its body"
        limit = self._front_end.header_timeout if in_head else self._front_end.body_timeout
        log.info("closing a connection that stalled while sending %s", what)
        self._fatal(
            RequestTimeout(
                f"the request was not sent in time: {what} stalled for more than {limit:g} s"
            )
        )


def _nbytes(part: Chunk) -> int:
    return part.nbytes if isinstance(part, np.ndarray | memoryview) else len(part)


def _write_parts(
    transport: asyncio.WriteTransport, head: list[Chunk], parts: Sequence[Chunk]
) -> None:
    """The head and body parts, small ones joined, large ones as they are (no copy).

    A large part goes to the transport as a memoryview: what the socket does not take at
    once stays queued as a slice of it, where a bytes object would be copied.
    """
    pending: list[Chunk] = list(head)
    for part in parts:
        if _nbytes(part) < _LARGE_BODY:
            pending.append(part)
            continue
        transport.write(b"".join(pending))  # type: ignore[arg-type]  # ndarray is a Buffer
        pending = []
        transport.write(memoryview(part).cast("B"))  # type: ignore[arg-type]
    if pending:
        transport.write(b"".join(pending))  # type: ignore[arg-type]


class HTTPToolsFrontEnd:
    """An HTTP front end on :class:`HTTPProtocol`: listens, keeps the Date header fresh,
    closes idle keep-alive connections, and stops gracefully.

    ``auth`` (when given) guards every path but ``open_paths``; ``access`` is the access
    log's switch (see ``access_log.py``).
    """

    def __init__(
        self,
        routes: Routes,
        host: str,
        port: int,
        *,
        max_body_bytes: int,
        name: str = "http",
        auth: BearerAuth | None = None,
        open_paths: frozenset[str] = OPEN_HTTP_PATHS,
        ssl_context: ssl.SSLContext | None = None,
        header_timeout: float = HEADER_TIMEOUT_SECONDS,
        body_timeout: float = BODY_TIMEOUT_SECONDS,
        keep_alive_timeout: float = KEEP_ALIVE_SECONDS,
        backlog: int = BACKLOG,
        access: AccessLog | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        """``sock``: a listening socket to serve (one shared by several front-end
        processes) instead of binding ``host``:``port``."""
        self.name = name
        # Read by every connection; a front end given none writes no access lines.
        self.access = access if access is not None else AccessLog()
        self._sock = sock
        self.routes = routes
        self.begin_infer = routes.begin_infer if isinstance(routes, InferRoutes) else None
        self.tracer: TracingSwitch = _Untraced()
        if isinstance(routes, InferRoutes):
            self.tracer = routes.tracer
        self.max_body_bytes = max_body_bytes
        self.auth = auth
        self.open_paths = open_paths
        self.backlog = backlog
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.keep_alive_timeout = keep_alive_timeout
        self._ssl = ssl_context
        self.connections: set[HTTPProtocol] = set()
        self.scratch = memoryview(bytearray(_SCRATCH_BYTES))
        self.date = b""
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by start()

    @property
    def port(self) -> int:
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._refresh()
        sock = self._sock
        if sock is None:
            sock = bind(self._host, self._port, front_end_label(self.name))
        self._server = await self.loop.create_server(
            lambda: HTTPProtocol(self),
            sock=sock,
            backlog=self.backlog,
            ssl=self._ssl,
            # A client that never finishes its TLS handshake is a slow sender too.
            ssl_handshake_timeout=self.header_timeout if self._ssl is not None else None,
        )
        self._ticker = self.loop.create_task(self._tick(), name=f"{self.name}-tick")
        log.info("%s listening on %s", self.name, self.url)

    def _refresh(self) -> None:
        self.date = b"date: " + formatdate(usegmt=True).encode() + b"\r\n"

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._refresh()
            now = time.monotonic()
            cutoff = now - self.keep_alive_timeout
            for connection in list(self.connections):
                if connection.idle_since is not None and connection.idle_since < cutoff:
                    connection.shutdown()
                else:
                    connection.check_read_timeout(now)

    async def stop(self, timeout: float) -> None:
        """Stop listening, close idle connections, let in-flight requests finish (bounded)."""
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if self._server is None:
            return
        self._server.close()
        for connection in list(self.connections):
            connection.shutdown()
        deadline = self.loop.time() + timeout
        while self.connections and self.loop.time() < deadline:
            await asyncio.sleep(0.02)
        for connection in list(self.connections):
            log.warning("closing a connection whose request did not finish in %.1f s", timeout)
            connection.abort()
        await self._server.wait_closed()
        log.info("%s stopped", self.name)
