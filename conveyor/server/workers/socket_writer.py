"""Frames written to a socket from any thread, in order, never blocking the writer.

The engine process's replies are written by the instance thread that completed the
request, straight to the front end's socket: handing each reply to the event loop first
would cost a wakeup of the loop per request (a write to its wakeup descriptor, a return
from ``epoll_wait``, a read, an iteration) on top of the write itself, which on a loaded
machine is a large part of the link's cost.

A write goes out at once with one non-blocking ``sendmsg`` when nothing is waiting before
it. What the socket does not take (a slow reader, a frame larger than its buffer) waits in
a backlog that the loop writes as the socket drains (``add_writer``); later frames queue
behind it, so frames never interleave or reorder. A lock makes each frame's parts one
unit; a thread that finds another writing hands its frame to that one instead of
waiting. ``drain`` lets a producer on the loop (a stream) wait while the backlog is large.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import socket
import threading

# Parts per sendmsg: the kernel's limit on the iovec count.
MAX_PARTS = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)
# A producer that awaits drain() waits while more than this is unsent.
HIGH_WATER_BYTES = 256 << 10

Part = bytes | memoryview


class SocketWriter:
    """Writes frames (lists of parts) to ``sock``'s peer; see the module docstring."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        # Its own descriptor (the loop's transport owns and closes the other); both share
        # one open file, so non-blocking here is non-blocking for the loop's reads too.
        self._sock = sock.dup()
        self._sock.setblocking(False)
        self._fd = self._sock.fileno()
        self._loop = loop
        self._lock = threading.Lock()
        self._handed: collections.deque[list[Part]] = collections.deque()  # to write
        self._backlog: collections.deque[Part] = collections.deque()
        self._backlog_bytes = 0
        self._watching = False
        self._closed = False
        self._drained: asyncio.Future[None] | None = None  # the loop's only

    def write(self, parts: list[Part]) -> None:
        """Write ``parts`` now if the socket takes them, else after what waits (any thread).

        A thread that finds another one writing does not wait for it: it leaves its frame
        in ``_handed`` and the writer sends it with its own, before it lets go (so two
        instance threads answering at once cost one ``sendmsg``, and no thread sleeps on
        the lock while the other is in the kernel)."""
        self._handed.append(parts)
        self._write_handed_unless_busy()

    def _write_handed_unless_busy(self) -> None:
        # Whoever holds the lock checks again after letting go: a frame handed over just
        # before that is written by one of the two, never left behind.
        while self._handed and self._lock.acquire(blocking=False):
            try:
                watch = self._write_handed()
            finally:
                self._lock.release()
            if watch:
                with contextlib.suppress(RuntimeError):  # the loop is closed: no one to write to
                    self._loop.call_soon_threadsafe(self._watch)

    def _write_handed(self) -> bool:
        """Send every handed frame (the lock is held); whether the loop must start
        watching the socket for room."""
        handed = self._handed
        batch: list[Part] = []
        while handed:
            batch += handed.popleft()
        if self._closed:
            return False
        if self._backlog:
            self._queue(batch)
            return False
        rest = self._send(batch)
        if not rest:
            return False
        self._queue(rest)
        if self._watching:
            return False
        self._watching = True
        return True

    def _queue(self, parts: list[Part]) -> None:
        self._backlog.extend(parts)
        self._backlog_bytes += sum(len(p) for p in parts)

    def _send(self, parts: list[Part]) -> list[Part]:
        """Send what the socket takes now; the rest, in order (the lock is held)."""
        while parts:
            try:
                sent = self._sock.sendmsg(parts[:MAX_PARTS])
            except (BlockingIOError, InterruptedError):
                return parts
            except OSError:  # the peer is gone: the reading side closes the link
                self._closed = True
                self._backlog.clear()
                return []
            parts = _after(parts, sent)
        return parts

    # -- on the loop: the backlog, as the socket drains -------------------------------------

    def _watch(self) -> None:
        if self._closed:
            return
        self._loop.add_writer(self._fd, self._writable)

    def _writable(self) -> None:
        with self._lock:
            self._write_handed()  # frames handed over meanwhile go after the backlog
            rest = self._send(list(self._backlog))
            self._backlog = collections.deque(rest)
            self._backlog_bytes = sum(len(p) for p in rest)
            done = not rest or self._closed
            if done:
                self._watching = False
        if done:
            self._loop.remove_writer(self._fd)
        self._write_handed_unless_busy()
        if self._backlog_bytes <= HIGH_WATER_BYTES:
            self._wake_drainers()

    @property
    def closed(self) -> bool:
        return self._closed

    def _wake_drainers(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    async def drain(self) -> None:
        """Return once no more than :data:`HIGH_WATER_BYTES` wait (or the peer is gone)."""
        if self._backlog_bytes <= HIGH_WATER_BYTES or self._closed:
            return
        if self._drained is None:
            self._drained = self._loop.create_future()
        await asyncio.shield(self._drained)  # one waiter cancelled leaves the others

    def close(self) -> None:
        """Write what the socket takes now, drop the rest, close (on the loop)."""
        with self._lock:
            if self._closed:
                return
            if self._backlog:
                self._send(list(self._backlog))
            self._closed = True
            self._backlog.clear()
            watching, self._watching = self._watching, False
        if watching:
            self._loop.remove_writer(self._fd)
        self._wake_drainers()
        self._sock.close()


def _after(parts: list[Part], sent: int) -> list[Part]:
    """``parts`` without their first ``sent`` bytes."""
    for index, part in enumerate(parts):
        size = len(part)
        if sent < size:
            rest = parts[index:]
            if sent:
                rest[0] = memoryview(part)[sent:]
            return rest
        sent -= size
    return []
