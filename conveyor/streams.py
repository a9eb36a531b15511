"""The iterator a streaming request returns: responses in the order they are produced.

A decoupled model answers one request with zero, one or many responses. The producer (an
engine instance thread, or a client's receiving thread) ``put``s each one; the consumer
iterates, with ``for`` or ``async for``. The buffer between them is bounded: a producer that
runs ahead of its consumer waits in ``put``, so a slow consumer slows the model instead of
growing memory. Closing the stream (``close()``, leaving a ``with`` block, or dropping an
``async for`` early) tells the producer to stop: its next ``put`` raises
:class:`~conveyor.errors.Cancelled`, and a model's generator is closed at its next yield.

Like :mod:`conveyor.futures`, this is shared by the engine and the clients, so code moves
from in-process streaming to remote streaming unchanged.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from conveyor.errors import Cancelled, DeadlineExceeded
from conveyor.futures import Outputs

DEFAULT_BUFFER = 16  # responses a stream holds for a consumer that has not read them yet


class ResponseStream(Iterator[Outputs], AsyncIterator[Outputs]):
    """Responses of one request, as they are produced; iterate with ``for`` or ``async for``.

    Iteration ends after the last response; an error of the request (refused in the queue,
    the model failed, deadline) is raised where the next response would have been.
    """

    request_id: str | None = None
    model_name: str | None = None
    model_version: str | None = None

    def __init__(self, buffer: int = DEFAULT_BUFFER) -> None:
        if buffer < 1:
            raise ValueError(f"buffer must be >= 1 response, got {buffer}")
        self._buffer = buffer
        self._changed = threading.Condition()
        self._items: deque[Outputs] = deque()
        self._ended = False  # the producer sent its last response (or failed)
        self._error: BaseException | None = None
        self._closed = False  # the consumer went away
        self._ended_with_response = False  # the last response came marked as the last
        self._cancel_requested = False  # the consumer asked the producer to stop, reads on
        self._on_close: list[Callable[[], object]] = []
        # async consumers waiting for a change: (their loop, the future to wake)
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    # -- the producer's side ---------------------------------------------------------------

    def put(self, outputs: Outputs, timeout: float | None = None, final: bool = False) -> None:
        """Hand one response to the consumer; wait while the buffer is full. ``final``: the
        producer says it is the last (``finish`` follows): ``ended_with_response``.

        Raises Cancelled once the consumer has closed the stream (stop producing), and
        DeadlineExceeded if the buffer stays full for ``timeout`` seconds.
        """
        with self._changed:
            if not self._changed.wait_for(
                lambda: self._closed or len(self._items) < self._buffer, timeout
            ):
                raise DeadlineExceeded(
                    f"the stream's consumer read nothing for {timeout} s with "
                    f"{self._buffer} responses waiting"
                )
            if self._closed:
                raise Cancelled("the stream was closed by its consumer")
            if self._ended:
                raise Cancelled("the stream has ended; no response can follow its last")
            self._items.append(outputs)
            self._ended_with_response = final
            self._wake()

    def finish(self, error: BaseException | None = None) -> None:
        """No response follows: end the iteration (with ``error`` raised, if given)."""
        with self._changed:
            if self._ended:
                return
            self._ended = True
            self._error = error
            self._wake()

    def on_close(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` (once, on the consumer's thread) when the consumer closes."""
        with self._changed:
            if not self._closed:
                self._on_close.append(callback)
                return
        callback()

    def request_cancel(self) -> None:
        """Ask the producer to stop (``cancel_requested``) while reading on: what it still
        sends, an error included, is read as usual (Triton's BLS ResponseIterator.cancel,
        which a model may also ignore)."""
        self._cancel_requested = True

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    @property
    def ended_with_response(self) -> bool:
        """True when the producer marked its last response as the last (a Triton model's
        ``send(response, flags=COMPLETE_FINAL)``), not ended after it with no response."""
        return self._ended_with_response

    @property
    def closed(self) -> bool:
        """True once the consumer went away: nothing it is sent will be read."""
        return self._closed

    def _wake(self) -> None:
        # Under self._changed.
        self._changed.notify_all()
        waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            loop.call_soon_threadsafe(_wake_up, waiter)

    # -- the consumer's side ---------------------------------------------------------------

    def close(self) -> None:
        """Stop reading: the producer stops at its next response; unread ones are dropped."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            self._items.clear()
            callbacks, self._on_close = self._on_close, []
            self._wake()
        for callback in callbacks:
            callback()

    cancel = close

    def next(self, timeout: float | None = None) -> Outputs:
        """The next response; StopIteration after the last, TimeoutError after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                item = self._take()
                if item is not None:
                    return item
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"no response within {timeout} s")
                self._changed.wait(left)

    def __next__(self) -> Outputs:
        return self.next()

    def __iter__(self) -> ResponseStream:
        return self

    def __aiter__(self) -> ResponseStream:
        return self

    async def __anext__(self) -> Outputs:
        loop = asyncio.get_running_loop()
        while True:
            with self._changed:
                try:
                    item = self._take()
                except StopIteration:
                    raise StopAsyncIteration from None
                if item is not None:
                    return item
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            try:
                await waiter
            except asyncio.CancelledError:
                self.close()  # the consuming task went away: so did the consumer
                raise

    def _take(self) -> Outputs | None:
        """Under self._changed: the next response, None to wait, StopIteration at the end."""
        if self._items:
            item = self._items.popleft()
            self._changed.notify_all()  # room for a waiting producer
            return item
        if self._closed:
            raise StopIteration
        if self._ended:
            if self._error is not None:
                error, self._error = self._error, None
                self._closed = True
                raise error
            raise StopIteration
        return None

    def __enter__(self) -> ResponseStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A consumer that dropped its stream without closing it still releases the producer.
        if not self._closed and not self._ended:
            self.close()


def _wake_up(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_result(None)
