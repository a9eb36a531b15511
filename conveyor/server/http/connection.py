"""The server's HTTP/1.1 connection, straight on asyncio: the V2 port and the metrics port.

Three modules make the HTTP/1.1 front end: ``parser.py`` turns bytes into requests (no
I/O), ``responses.py`` turns answers into bytes, and this one is the asyncio glue between
them and the routes: one :class:`HTTPProtocol` per connection. ``listener.py`` accepts
connections and runs their timers.

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
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

from conveyor.errors import InvalidInput, MethodNotAllowed, RequestTimeout
from conveyor.protocol.binary import BytesLike, Chunk
from conveyor.server.access_log import AccessLog
from conveyor.server.auth import CHALLENGE
from conveyor.server.http import body as bodies
from conveyor.server.http import parser as parsing
from conveyor.server.http import responses
from conveyor.server.http.errors import error_response
from conveyor.server.http.parser import ParsedRequest, RequestParser
from conveyor.server.http.routes import (
    JSON,
    ChunkedReply,
    Headers,
    PendingInfer,
    Reply,
)
from conveyor.server.stream_send import stalled_message
from conveyor.wakeups import mailbox

log = logging.getLogger("conveyor.http")

# Pipelined requests parsed ahead of their turn; past this, stop reading the connection.
# (Pausing costs syscalls, so it is not done per request.)
_MAX_PIPELINED = 4


# A reply whose body is written until the connection closes (server-sent events): no
# Content-Length and no chunked encoding; the connection closes when the iterator ends, or
# when the server stops. (A ChunkedReply keeps the connection open after its last chunk.)
UntilCloseReply = tuple[int, AsyncIterator[bytes], Headers]


class Routes(Protocol):
    """What an HTTP listener (``listener.py``) serves (``V2Routes``, the metrics port's routes)."""

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


class Untraced:
    on = False


class FrontEnd(Protocol):
    """What a connection reads of the listener that accepted it (``listener.py``)."""

    routes: Routes
    access: AccessLog
    begin_infer: Callable[..., PendingInfer] | None
    tracer: TracingSwitch
    max_body_bytes: int
    header_timeout: float
    body_timeout: float
    stream_send_timeout: float  # a streamed reply's client reads nothing this long: closed
    connections: set[HTTPProtocol]
    scratch: memoryview
    date: bytes  # the Date header line, refreshed every second
    loop: asyncio.AbstractEventLoop
    # Raises Unauthenticated for a request the token guard refuses; None: no guard.
    authorize: Callable[[str, bytes | None], None] | None


class HTTPProtocol(asyncio.BufferedProtocol):
    """One client connection."""

    def __init__(self, front_end: FrontEnd) -> None:
        self._front_end = front_end
        self._routes = front_end.routes
        self._access = front_end.access
        self._begin_infer = front_end.begin_infer
        self._tracer = front_end.tracer
        self._limit = front_end.max_body_bytes
        self._loop = front_end.loop
        self._mailbox = mailbox(front_end.loop)
        self._requests = RequestParser(self._limit, front_end.authorize)
        self._transport: asyncio.Transport | None = None
        self._scratch = front_end.scratch
        self._queue: collections.deque[ParsedRequest] = collections.deque()  # parsed, waiting
        self._busy = False  # a request is being handled (responses go out in order)
        self._inflight: PendingInfer | None = None
        self._task: asyncio.Task[None] | None = None
        self._streaming = False  # a UntilCloseReply is being written: stop() cuts it short
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
        self._requests.close()
        if self._inflight is not None:
            self._inflight.future.cancel()  # nobody will read it: drop it if still queued
        if self._task is not None:
            self._task.cancel()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._requests.direct is not None:
            return self._requests.direct_target
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        if self._requests.direct is None:
            self.data_received(self._scratch[:nbytes])
            return
        self.read_deadline = time.monotonic() + self._front_end.body_timeout
        self._handle_events(self._requests.direct_filled(nbytes))

    def data_received(self, data: BytesLike) -> None:
        if self._requests.discarding:
            return
        self.idle_since = None
        try:
            events = self._requests.feed(data)
        except InvalidInput as exc:
            self._fatal(exc)
            return
        if events:
            self._handle_events(events)
        current = self._requests.current
        if current is not None and current.method:  # more of a body arrived: in time
            self.read_deadline = time.monotonic() + self._front_end.body_timeout

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
            and not self._requests.discarding
            and len(self._queue) < _MAX_PIPELINED
            and self._transport is not None
        ):
            self._read_paused = False
            self._transport.resume_reading()

    # -- the parser's events -----------------------------------------------------------

    def _handle_events(self, events: list[parsing.Event]) -> None:
        for kind, request in events:
            if kind == parsing.BEGIN:
                self.read_deadline = time.monotonic() + self._front_end.header_timeout
                if self._access.enabled:  # the access log's one check per request
                    request.started = time.perf_counter()
                if self._tracer.on:  # tracing's one check per request (HTTP_RECV_START)
                    request.recv_start = time.perf_counter_ns()
            elif kind == parsing.HEAD:
                self.read_deadline = time.monotonic() + self._front_end.body_timeout
                if request.expect_continue and self._transport is not None:
                    self._transport.write(responses.CONTINUE)  # the body is acceptable
            elif kind == parsing.COMPLETE:
                self.read_deadline = None
                self._queue.append(request)
                if not self._busy:
                    self._next()
                elif len(self._queue) >= _MAX_PIPELINED:
                    self._pause_reading()
            else:  # REJECT: the parser reads nothing more of this connection
                self._reject(request)

    # -- handling -----------------------------------------------------------------------

    def _reject(self, request: ParsedRequest) -> None:
        """A request that must not be read further: answer it (in order) and close."""
        self.read_deadline = None
        self._pause_reading()
        self._queue.append(request)
        if not self._busy:
            self._next()

    def _fatal(self, error: Exception) -> None:
        self._reject(self._requests.refuse(error))

    def _next(self) -> None:
        # Take the next parsed request; its answer (now or from a callback) calls us again.
        while not self._busy and self._queue and self._transport is not None:
            request = self._queue.popleft()
            self._busy = True  # one request at a time per connection, answered in order
            self._handle(request)

    def _handle(self, request: ParsedRequest) -> None:
        try:
            if request.error is not None:
                raise request.error
            body = request.joined_body()
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
                box = self._mailbox  # one wakeup of the loop for answers that come together
                pending.future.add_done_callback(lambda _: box.post(self._infer_done, request))
                return
            self._task = self._loop.create_task(self._route(request, body))
        except Exception as exc:
            self._respond(request, *self._error(exc, request.path))

    def _infer_done(self, request: ParsedRequest) -> None:
        pending, self._inflight = self._inflight, None
        if self._transport is None or pending is None:
            return
        if request.started:
            request.request_id = pending.request.id
        life = pending.life
        try:
            status, body, headers = pending.reply_parts(pending.future.result())
        except Exception as exc:  # the engine's error, or cancelled
            status, error_body, headers = self._error(exc)
            # Raised here, its traceback holds this frame, which holds the future that
            # holds it: a cycle only the collector would free, with the request's tensors.
            exc.__traceback__ = None
            life.failed()
            self._respond(request, status, [error_body], headers)
            return
        # HTTP_SEND_START as the answer goes to the transport, HTTP_SEND_END once the
        # transport took it (written to the socket, or buffered by the transport).
        life.sending()
        self._respond(request, status, body, headers)
        life.sent()

    async def _route(self, request: ParsedRequest, body: BytesLike) -> None:
        async def read_body() -> bytes:
            # Only infer bodies stay views; other routes are rare and take bytes.
            return body if isinstance(body, bytes) else bytes(body)

        reply: Reply | ChunkedReply | UntilCloseReply
        try:
            reply = await self._routes.handle(
                request.method, request.path, read_body, request.header_length
            )
        except Exception as exc:
            reply = self._error(exc, request.path)
        if isinstance(reply, ChunkedReply):  # a chunked body (generate_stream)
            try:
                written = await self._write_stream(
                    request, reply.status, reply.headers, reply.chunks, responses.CHUNKED
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

    async def _stream_until_close(self, request: ParsedRequest, reply: UntilCloseReply) -> None:
        """A close-delimited stream (dashboard events): the connection serves nothing after
        it, and the server's stop cuts it short."""
        status, chunks, headers = reply
        self._streaming = True
        try:
            await self._write_stream(request, status, headers, chunks, responses.UNTIL_CLOSE)
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
        request: ParsedRequest,
        status: int,
        headers: Headers,
        chunks: AsyncIterator[bytes],
        framing: responses.Framing,
    ) -> bool:
        """Write the head, then each chunk as the iterator yields it, framed as ``framing``
        says; True once the whole body is written (the caller then ends the response)."""
        transport = self._transport
        if transport is None or (framing.ends_on_shutdown and self._closing):
            return False
        head = responses.head_lines(status, self._front_end.date, headers)
        head.append(framing.end_of_head)
        transport.write(b"".join(head))  # type: ignore[arg-type]  # all bytes here
        if request.method == "HEAD":
            return True  # a head and no body
        async for chunk in chunks:
            if self._transport is None or (framing.ends_on_shutdown and self._closing):
                return False
            if framing.cuts_slow_clients:
                if transport.get_write_buffer_size() > responses.STREAM_BACKLOG:
                    return False
                transport.write(framing.frame(chunk))
                continue
            transport.write(framing.frame(chunk))
            if self._write_paused and not await self._drain_within(
                self._front_end.stream_send_timeout
            ):
                return False
        if self._transport is None:
            return False
        if framing.last_chunk:
            transport.write(framing.last_chunk)
        return True

    async def _drain_within(self, timeout: float) -> bool:
        """Wait until the transport's buffer drains; after ``timeout`` seconds (0: no limit)
        with nothing of it taken, the connection is closed (the model's responses are not
        held for a client that stopped reading) and False returned."""
        while self._write_paused and self._transport is not None:
            self._drained = self._loop.create_future()
            if timeout <= 0:
                await self._drained
                continue
            unsent = self._transport.get_write_buffer_size()
            try:
                await asyncio.wait_for(self._drained, timeout)
            except TimeoutError:
                if self._transport is None:
                    return False
                if self._transport.get_write_buffer_size() < unsent:
                    continue  # a slow reader, not a stopped one: its clock starts again
                log.info("HTTP stream closed: %s", stalled_message(timeout))
                self._transport.abort()  # its unsent bytes go too: nobody reads them
                return False
        return self._transport is not None

    @staticmethod
    def _error(exc: BaseException, path: str = "") -> Reply:
        if isinstance(exc, asyncio.CancelledError):
            exc = InvalidInput("the request was cancelled")
        status, body = error_response(exc, path)
        if isinstance(exc, RequestTimeout):
            status = 408  # a transport matter, not a kind the engine knows
        if isinstance(exc, MethodNotAllowed):
            return 405, body, [*JSON, (b"allow", ", ".join(exc.allow).encode())]
        return status, body, JSON

    def _respond(
        self, request: ParsedRequest, status: int, body: bytes | Sequence[Chunk], headers: Headers
    ) -> None:
        transport = self._transport
        if transport is None:
            return
        if isinstance(body, bytes):
            parts: Sequence[Chunk] = (body,)
            length = len(body)
        else:
            parts = body
            length = sum(responses.nbytes(part) for part in parts)
        encoding = None
        if request.accept is not None and length >= bodies.COMPRESS_MIN_BYTES:
            joined = b"".join(parts)  # type: ignore[arg-type]  # ndarray is a Buffer
            compressed, encoding = bodies.maybe_compress(
                request.path, status, joined, request.accept
            )
            parts, length = (compressed,), len(compressed)
        keep_alive = request.keep_alive and not self._closing
        head = responses.head_lines(status, self._front_end.date, headers)
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
        elif length < responses.LARGE_BODY:
            head += parts
            transport.write(b"".join(head))  # type: ignore[arg-type]  # ndarray is a Buffer
        else:
            responses.write_parts(transport, head, parts)
        if request.started:
            self._log_access(request, status)
        self._finish_response(transport, keep_alive)

    def _log_access(self, request: ParsedRequest, status: int) -> None:
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
        idle = not self._busy and not self._queue and self._requests.current is None
        if idle and self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def check_read_timeout(self, now: float) -> None:
        """Cut off a client that stalled mid-request (408, then close)."""
        deadline = self.read_deadline
        if deadline is None or now < deadline or self._read_paused or self._requests.discarding:
            return  # not reading a request, in time, or we are the ones not reading
        current = self._requests.current
        in_head = current is not None and not current.method
        what = "its headers" if in_head else "its body"
        limit = self._front_end.header_timeout if in_head else self._front_end.body_timeout
        log.info("closing a connection that stalled while sending %s", what)
        self._fatal(
            RequestTimeout(
                f"the request was not sent in time: {what} stalled for more than {limit:g} s"
            )
        )
