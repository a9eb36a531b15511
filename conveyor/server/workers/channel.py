"""One end of the multiplexed connection, run by the event loop itself.

The loop reads the socket as a :class:`asyncio.Protocol`: each read is cut into frames
(:class:`~conveyor.server.workers.wire.FrameReader`) and every frame it completed is handed
over at once, with no task, no ``await`` per frame and no other thread. Frames to send are
queued and written together once the loop has run what was ready: many calls or replies
per system call under load, one per request when idle (the flush runs in the same loop
iteration, so nothing waits for a timer).

Writes are the loop's only: other threads hand over work with ``call_soon_threadsafe``.
``drain`` waits while the transport's buffer is over its high-water mark (a peer that
reads slowly slows the sender down, as ``StreamWriter.drain`` did).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import cast

from conveyor.server.workers.wire import FrameReader

OnFrame = Callable[[int, bytes, list[bytes]], None]


class FrameChannel(asyncio.Protocol):
    """Frames in (to ``on_frame``), frames out (``send``), ``on_lost`` once at the end."""

    def __init__(self, on_frame: OnFrame, on_lost: Callable[[], None]) -> None:
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._reader = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._outgoing: list[bytes | memoryview] = []
        self._loop = asyncio.get_running_loop()
        self._paused: asyncio.Future[None] | None = None
        self._lost = False

    @classmethod
    async def open(
        cls, sock: socket.socket, on_frame: OnFrame, on_lost: Callable[[], None]
    ) -> FrameChannel:
        channel = cls(on_frame, on_lost)
        await asyncio.get_running_loop().create_unix_connection(lambda: channel, sock=sock)
        return channel

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._reader.feed(data)
        except ConnectionError:  # a corrupt stream: nothing after it can be trusted
            self.close()
            return
        on_frame = self._on_frame
        for kind, meta, buffers in frames:
            on_frame(kind, meta, buffers)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._outgoing.clear()
        self._wake_writers()
        self._on_lost()

    def pause_writing(self) -> None:
        if self._paused is None:
            self._paused = self._loop.create_future()

    def resume_writing(self) -> None:
        self._wake_writers()

    def _wake_writers(self) -> None:
        paused, self._paused = self._paused, None
        if paused is not None and not paused.done():
            paused.set_result(None)

    # -- sending ----------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        return self._lost or self._transport is None or self._transport.is_closing()

    def send(self, parts: list[bytes | memoryview]) -> None:
        """Queue one frame; the queue is written once the loop has run what is ready."""
        if self.closing:
            return
        if not self._outgoing:
            self._loop.call_soon(self._flush)
        self._outgoing += parts

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        if outgoing and not self.closing:
            assert self._transport is not None
            self._transport.writelines(outgoing)

    async def drain(self) -> None:
        """Return once the peer has read enough of what was sent (or has gone)."""
        self._flush()
        paused = self._paused
        if paused is not None:
            await asyncio.shield(paused)  # one waiter cancelled leaves the others waiting

    def close(self) -> None:
        self._flush()  # what was queued is written before the end
        if self._transport is not None:
            self._transport.close()
