"""One gRPC call on an HTTP/2 stream: its context (what the servicer sees) and its state.

The servicer asks a call's context for four things only: ``abort`` (end the call with a
status; raises), ``code``, ``time_remaining`` (from ``grpc-timeout``) and
``invocation_metadata`` (``traceparent``, ``authorization``). :class:`CallContext` is that
interface, with ``grpc.StatusCode`` values so ``conveyor.server.grpc.errors`` serves both
transports unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn, cast

import grpc
import numpy as np

from conveyor.server.grpc.h2.streams import Stream
from conveyor.server.grpc.service import Bound, Started

log = logging.getLogger("conveyor.server.grpc")

Metadata = tuple[tuple[str, str | bytes], ...]
# Complete request messages a stream may hold unread before its window stops growing.
UNREAD_MESSAGES = 4

_PREFIX = struct.Struct(">BI")  # compressed flag, message length
# The grpc-encoding values request messages may be compressed with (grpcio's and Triton's
# servers accept both), and zlib's window bits for each: gzip's wrapper, and zlib's (what
# HTTP and gRPC call "deflate").
INFLATE_WBITS = {b"gzip": 16 + zlib.MAX_WBITS, b"deflate": zlib.MAX_WBITS}
# Reads go straight into a message's buffer when at least this much of it is still to come.
DIRECT_READ = 32 * 1024
_END_ALIGNMENT = 64


class CallContext:
    """``grpc.aio.ServicerContext``'s methods that the servicer uses, for one call."""

    __slots__ = ("_code", "_deadline", "_details", "_done", "_ender", "_metadata", "opened")

    def __init__(self, metadata: Metadata, timeout: float | None) -> None:
        self._metadata = metadata
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._done: list[Callable[[CallContext], object]] | None = None
        # When the call's headers arrived (perf_counter): a traced unary call's
        # GRPC_WAITREAD_START, so its trace covers the read of its message.
        self.opened = time.perf_counter()
        # Ends the call from outside its handler (set by the connection for a stream).
        self._ender: Callable[[grpc.StatusCode, str], None] | None = None

    def add_done_callback(self, callback: Callable[[CallContext], object]) -> None:
        """Call ``callback(context)`` once the call has ended: its status sent, or the call
        reset or its connection lost (a traced request's GRPC_SEND_END)."""
        if self._done is None:
            self._done = []
        self._done.append(callback)

    def ended(self) -> None:
        """The call ended: run the done callbacks, once."""
        self._ender = None  # it refers to the connection: no cycle outlives the call
        callbacks, self._done = self._done, None
        for callback in callbacks or ():
            try:
                callback(self)
            except Exception:
                log.exception("a gRPC call's done callback failed")

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        """End the call with ``code`` and ``details``: raises ``grpc.aio.AbortError``."""
        self._code = code
        self._details = details
        raise grpc.aio.AbortError()

    def abort_now(self, code: grpc.StatusCode, details: str) -> None:
        """End the call with ``code`` from another task than its handler, even while the
        handler waits to write (a client that stopped reading): the status, or a reset if
        a message is half-sent; the handler is cancelled."""
        self._code = code
        self._details = details
        if self._ender is not None:
            self._ender(code, details)

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def details(self) -> str:
        return self._details

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def set_details(self, details: str) -> None:
        self._details = details

    def time_remaining(self) -> float | None:
        """Seconds left before the client's deadline; None when it set none."""
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def invocation_metadata(self) -> Metadata:
        return self._metadata


class MessageTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class ReceiveBudgetSpent(Exception):
    """The connection's calls already hold as many bytes of unfinished messages as allowed."""

    def __init__(self, size: int, held: int, limit: int) -> None:
        super().__init__(size)
        self.size, self.held, self.limit = size, held, limit


class ReceiveBudget:
    """Bytes of message buffers allocated before their bytes arrived, for one connection.

    A buffer is allocated whole once a message's prefix announces its size; without a bound,
    a client could announce a maximal message on each of many streams, send none of them,
    and have the server allocate for all.
    """

    __slots__ = ("held", "limit")

    def __init__(self, limit: int) -> None:
        self.held = 0
        self.limit = limit


class CompressedMessage(Exception):
    """A message flagged compressed on a call whose encoding is identity."""


class InflatedTooLarge(Exception):
    """A compressed message that inflates past the size limit (inflating stopped there)."""


class UndecodableMessage(Exception):
    """A compressed message that does not inflate with its call's grpc-encoding."""


class Call:
    """A stream's state: the request messages being assembled, windows, the handler task.

    Request bytes are copied once: a message that arrives whole inside one read is sliced
    out of it; a longer one goes into a buffer of its announced size, allocated once its
    5-byte gRPC prefix is known (and checked against the size limit first).
    """

    __slots__ = (
        "_body",
        "_body_compressed",
        "_body_have",
        "_budget",
        "_inflated",
        "_limit",
        "_prefix",
        "_prefix_have",
        "_waiter",
        "context",
        "deadline_timer",
        "finished",
        "handler",
        "headers_sent",
        "messages",
        "method",
        "partway",
        "remote_closed",
        "stream",
        "stream_id",
        "wbits",
    )  # fmt: skip

    def __init__(
        self, stream: Stream, method: Bound | None, context: CallContext, limit: int,
        budget: ReceiveBudget,
    ) -> None:  # fmt: skip
        self.stream = stream  # its HTTP/2 state and windows, kept by the connection's core
        self.stream_id = stream.stream_id
        self.method = method
        self.context = context
        self.headers_sent = False
        self.remote_closed = False  # the client sent END_STREAM
        self.finished = False  # our END_STREAM (or a reset) is sent
        self.partway = False  # a response message is partly sent: no trailers until it ends
        # What answers the call: its handler's task, or a unary call the engine answers
        # through a callback; cancelled if the call ends first.
        self.handler: asyncio.Task[None] | Started | None = None
        # Complete messages, unread; a compressed one stays compressed (a _Deflated) until
        # it is taken, so unread messages hold what the client sent, not what it inflates to.
        self.messages: deque[bytes | _Deflated] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._prefix = bytearray()
        self._prefix_have = 0
        self._body: memoryview | None = None
        self._body_have = 0
        self._body_compressed = False
        self._limit = limit
        self._budget = budget
        self._inflated = 0  # bytes of inflated messages charged to the budget until the end
        self.deadline_timer: asyncio.TimerHandle | None = None  # ends the call at its deadline
        self.wbits = 0  # zlib's window bits for the call's grpc-encoding; 0: identity

    # -- receiving ------------------------------------------------------------------------

    def feed(self, data: bytes, start: int, end: int) -> None:
        """Take ``data[start:end]`` (DATA payload); complete messages go to ``messages``."""
        while start < end:
            body = self._body
            if body is not None:
                take = min(len(body) - self._body_have, end - start)
                memoryview(body)[self._body_have : self._body_have + take] = memoryview(data)[
                    start : start + take
                ]
                self._body_have += take
                start += take
                if self._body_have == len(body):
                    self._body = None
                    self._budget.held -= len(body)
                    self._complete(body, self._body_compressed)
                continue
            if self._prefix_have == 0 and end - start >= 5:
                flag, length = _PREFIX.unpack_from(data, start)
                start += 5
            else:
                take = min(5 - self._prefix_have, end - start)
                self._prefix += data[start : start + take]
                self._prefix_have += take
                start += take
                if self._prefix_have < 5:
                    return
                flag, length = _PREFIX.unpack_from(self._prefix, 0)
                self._prefix = bytearray()
                self._prefix_have = 0
            if flag and not self.wbits:
                raise CompressedMessage()
            if length > self._limit:
                raise MessageTooLarge(length)
            if length <= end - start:
                self._complete(data[start : start + length], bool(flag))
                start += length
            else:
                budget = self._budget
                if budget.held + length > budget.limit:
                    raise ReceiveBudgetSpent(length, budget.held, budget.limit)
                budget.held += length
                self._body = end_aligned_buffer(length)
                self._body_have = 0
                self._body_compressed = bool(flag)

    def direct_buffer(self, limit: int) -> memoryview | None:
        """The unfilled part of the message being received, at most ``limit`` bytes, for a
        read to land in directly; None when no large message is being filled."""
        body = self._body
        if body is None:
            return None
        count = min(len(body) - self._body_have, limit)
        if count < DIRECT_READ:
            return None
        return memoryview(body)[self._body_have : self._body_have + count]

    def filled(self, count: int) -> None:
        """``count`` bytes were read into :meth:`direct_buffer`'s view."""
        body = self._body
        assert body is not None
        self._body_have += count
        if self._body_have == len(body):
            self._body = None
            self._budget.held -= len(body)
            self._complete(body, self._body_compressed)

    def drop(self) -> None:
        """The call ended: nothing more is received, its unfinished message is let go."""
        self.finished = True
        if self._body is not None:
            self._budget.held -= len(self._body)
            self._body = None
        self._budget.held -= self._inflated
        self._inflated = 0
        self.messages.clear()
        self.context.ended()

    def take(self) -> bytes:
        """The next complete message, inflated if it came compressed (raises
        InflatedTooLarge, UndecodableMessage or ReceiveBudgetSpent)."""
        message = self.messages.popleft()
        if type(message) is _Deflated:
            return self._inflate(message.data)
        return cast(bytes, message)

    def partial(self) -> bool:
        """Part of a message was received, not all of it."""
        return self._body is not None or self._prefix_have > 0

    def _complete(self, message: bytes | memoryview, compressed: bool) -> None:
        """A whole message arrived: queued (a compressed one is inflated when taken). A
        message is handed on as it is, not copied to bytes: every deserializer here
        (protobuf, wire.split_raw) reads any buffer."""
        self.messages.append(_Deflated(message) if compressed else cast(bytes, message))
        self.wake()

    def _inflate(self, message: bytes | memoryview) -> bytes:
        inflater = zlib.decompressobj(self.wbits)
        try:
            # Never more than one byte past the limit is inflated: a small message that
            # would inflate to gigabytes costs no more than the limit.
            inflated = inflater.decompress(message, self._limit + 1)
        except zlib.error as exc:
            raise UndecodableMessage(str(exc)) from None
        if len(inflated) > self._limit:
            raise InflatedTooLarge()
        if not inflater.eof:
            raise UndecodableMessage("the compressed data ends before its end marker")
        # What a small message inflates to counts against the connection's budget until
        # the call ends: many small compressed calls do not hold gigabytes.
        budget = self._budget
        if budget.held + len(inflated) > budget.limit:
            raise ReceiveBudgetSpent(len(inflated), budget.held, budget.limit)
        budget.held += len(inflated)
        self._inflated += len(inflated)
        return inflated

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def requests(
        self, give_credit: Callable[[Call], None], failed: Callable[[Call, Exception], None]
    ) -> AsyncIterator[Any]:
        """The request messages, parsed, as the client sends them (a streaming call's).
        A message that cannot be inflated ends the call (``failed``) and the iteration."""
        return _Requests(self, give_credit, failed)


class _Deflated:
    """A complete message still compressed."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data


class _Requests:
    """Async iterator over a streaming call's messages; ends at the client's END_STREAM."""

    __slots__ = ("_call", "_deserialize", "_failed", "_give_credit")

    def __init__(
        self,
        call: Call,
        give_credit: Callable[[Call], None],
        failed: Callable[[Call, Exception], None],
    ) -> None:
        self._call = call
        self._give_credit = give_credit
        self._failed = failed
        assert call.method is not None
        self._deserialize = call.method.deserialize

    def __aiter__(self) -> _Requests:
        return self

    async def __anext__(self) -> Any:
        call = self._call
        while True:
            if call.finished:
                raise StopAsyncIteration
            if call.messages:
                try:
                    message = call.take()
                except (InflatedTooLarge, UndecodableMessage, ReceiveBudgetSpent) as exc:
                    self._failed(call, exc)
                    raise StopAsyncIteration from None
                self._give_credit(call)
                return self._deserialize(message)
            if call.remote_closed:
                raise StopAsyncIteration
            call._waiter = asyncio.get_running_loop().create_future()
            try:
                await call._waiter
            finally:
                call._waiter = None


def end_aligned_buffer(length: int) -> memoryview:
    """``length`` writable bytes whose end is 64-byte aligned.

    An infer request's raw tensor contents come last in its message, so the last tensor
    then starts on a multiple of its element size and is handed to the model as a view of
    the message: from a buffer aligned at its start instead, it would start wherever the
    message's fields put it, and be copied once into aligned memory (a few ms for 4 MiB).
    """
    backing = np.empty(length + _END_ALIGNMENT, np.uint8)
    pad = -(backing.ctypes.data + length) % _END_ALIGNMENT
    return memoryview(backing.data)[pad : pad + length]
