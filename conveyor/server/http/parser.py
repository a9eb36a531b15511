"""HTTP/1.1 requests from bytes, with no I/O: feed what the socket read, take the events.

:class:`RequestParser` wraps httptools' C parser. ``feed(data)`` parses and returns the
events that data completed, in order: :data:`BEGIN` (a request's first byte), :data:`HEAD`
(its request line and headers, checked), :data:`COMPLETE` (its whole body) and
:data:`REJECT` (a request refused before its body is read: the connection reads nothing
more). A malformed request raises :class:`~conveyor.errors.InvalidInput`. The connection
owns the socket, the clocks and the answers; this module owns what the bytes mean, so it is
tested without a socket.

A body declared at least ``DIRECT_BODY`` long is received into one buffer of its own
(:meth:`ParsedRequest.read_directly`): the connection reads the socket straight into
:attr:`RequestParser.direct_target` and calls :meth:`RequestParser.direct_filled`, and
httptools parses only the head.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote

import httptools
import numpy as np

from conveyor.errors import InvalidInput, Unauthenticated
from conveyor.protocol.binary import BytesLike
from conveyor.server.http import body as bodies

MAX_HEAD_BYTES = 64 * 1024  # request line + headers
# Bodies declared at least this long are read into their own buffer (smaller ones through
# the parser's callbacks, which cost less than a buffer switch for a few KiB).
DIRECT_BODY = 64 * 1024
_ALIGN = 64  # the first tensor of a directly read body starts at this alignment

BEGIN, HEAD, COMPLETE, REJECT = range(4)
Event = tuple[int, "ParsedRequest"]

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


class ParsedRequest:
    """One request as read: its head's fields, and its body as parts or its own buffer."""

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
        self.method = ""  # empty until the head is complete
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

    def joined_body(self) -> BytesLike:
        """The whole body: its own buffer, its one part, or its parts joined."""
        if self.direct is not None:
            return self.direct
        return b"".join(self.body) if len(self.body) != 1 else self.body[0]


def rejected(error: Exception, request: ParsedRequest | None = None) -> ParsedRequest:
    """``request`` (or a new one, for input that never made one) carrying ``error``."""
    request = request or ParsedRequest()
    request.error = error
    request.method = request.method or "GET"
    request.keep_alive = False
    return request


class RequestParser:
    """The requests of one connection, from its bytes; see the module's docstring.

    ``authorize`` (when given) is called with each head's path and Authorization value and
    raises :class:`Unauthenticated` to refuse it: the body of a refused request is never
    read.
    """

    def __init__(
        self,
        max_body_bytes: int,
        authorize: Callable[[str, bytes | None], None] | None = None,
    ) -> None:
        self._limit = max_body_bytes
        self._authorize = authorize
        self._parser = httptools.HttpRequestParser(self)
        self._events: list[Event] = []
        self._url = b""
        self._head_bytes = 0
        self.current: ParsedRequest | None = None  # being read
        # Its body goes straight into its own buffer: the socket reads into direct_target.
        self.direct: ParsedRequest | None = None
        self.discarding = False  # after a refused request: the rest of the input is ignored

    def feed(self, data: BytesLike) -> list[Event]:
        """Parse ``data``; the events it completed, in order. Raises InvalidInput."""
        events = self._events = []
        if self.discarding:
            return events
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise InvalidInput(
                "protocol upgrades (websockets, CONNECT) are not supported"
            ) from None
        except httptools.HttpParserError as exc:
            raise InvalidInput(f"malformed HTTP request: {exc}") from None
        current = self.current
        if current is not None and current.direct is not None and not self.discarding:
            self.direct = current  # the rest of its body goes straight into its buffer
        return events

    @property
    def direct_target(self) -> memoryview:
        """Where the socket's next read goes while a body is read directly."""
        request = self.direct
        assert request is not None and request.direct is not None
        return request.direct[request.filled :]  # never past this body's end

    def direct_filled(self, nbytes: int) -> list[Event]:
        """``nbytes`` more of the direct body arrived; COMPLETE once it is whole."""
        request = self.direct
        assert request is not None and request.direct is not None
        request.filled += nbytes
        events = self._events = []
        if request.filled == len(request.direct):
            # httptools never saw this body: a fresh parser starts at the next request.
            self.direct = None
            self._parser = httptools.HttpRequestParser(self)
            self.on_message_complete()
        return events

    def close(self) -> None:
        """The connection is gone. httptools' parser holds this object's callbacks and this
        object holds the parser: dropping it lets both go by reference counting, not at
        the next full garbage collection."""
        self._parser = None  # type: ignore[assignment]
        self.current = self.direct = None

    def refuse(self, error: Exception) -> ParsedRequest:
        """Stop reading: the request in progress (or a new one) carries ``error``."""
        request = rejected(error, self.current)
        self.discarding = True
        self.current = None
        self.direct = None
        return request

    # -- httptools callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        request = self.current = ParsedRequest()
        self._url = b""
        self._head_bytes = 0
        self._events.append((BEGIN, request))

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._head_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        request = self.current
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
        request = self.current
        assert request is not None
        request.method = self._parser.get_method().decode("ascii", "replace")
        request.keep_alive = self._parser.should_keep_alive()
        url = self._url
        if b"?" in url or b"#" in url:
            url = httptools.parse_url(url).path or b"/"
        path = url.decode("latin-1")
        request.path = unquote(path) if "%" in path else path
        if self._authorize is not None:
            try:
                self._authorize(request.path, request.authorization)
            except Unauthenticated as exc:
                request.error = exc  # first: a stranger learns nothing else, not even limits
        if request.error is not None:
            # Refuse now (e.g. Content-Length over the limit): never read that body.
            self._events.append((REJECT, self.refuse(request.error)))
            return
        self._events.append((HEAD, request))
        length = request.length
        if length is not None and length >= DIRECT_BODY and not request.chunked:
            request.read_directly(length)

    def on_body(self, data: bytes) -> None:
        request = self.current
        if request is None or request.error is not None:
            return
        request.size += len(data)
        if request.size > self._limit:
            error = bodies.too_large(f"more than {self._limit} bytes", self._limit)
            self._events.append((REJECT, self.refuse(error)))
            return
        if request.direct is not None:  # the part of the body that came with the head
            request.direct[request.filled : request.size] = data
            request.filled = request.size
            return
        request.body.append(data)

    def on_message_complete(self) -> None:
        request = self.current
        self.current = None
        if request is None or self.discarding:
            return
        self._events.append((COMPLETE, request))
