"""One end of the multiplexed connection, run by the event loop itself.

The loop reads the socket as a :class:`asyncio.Protocol`: each read is cut into frames
(:class:`~conveyor.ipc.frames.FrameReader`) and every frame it completed is handed
over at once, with no task, no ``await`` per frame and no other thread. Frames the loop
sends (``send``) are queued and written together once the loop has run what was ready:
many calls per system call under load, one per request when idle (the flush runs in the
next loop iteration, so nothing waits for a timer). Any other thread writes its frame at
once (``send_now``, through the same
:class:`~conveyor.server.workers.socket_writer.SocketWriter`, so frames never interleave),
with no hand-off to the loop. ``drain`` waits while much is unsent (a peer that reads
slowly slows the sender down, as ``StreamWriter.drain`` did).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import cast

from conveyor.ipc.frames import Buffer, FrameReader
from conveyor.server.workers.socket_writer import SocketWriter

OnFrame = Callable[[int, Buffer, list[Buffer]], None]


class FrameChannel(asyncio.Protocol):
    """Frames in (to ``on_frame``), frames out (``send``), ``on_lost`` once at the end."""

    def __init__(self, sock: socket.socket, on_frame: OnFrame, on_lost: Callable[[], None]) -> None:
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._reader = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._outgoing: list[bytes | memoryview] = []
        self._loop = asyncio.get_running_loop()
        self._writer = SocketWriter(sock, self._loop)
        self._lost = False

    @classmethod
    async def open(
        cls, sock: socket.socket, on_frame: OnFrame, on_lost: Callable[[], None]
    ) -> FrameChannel:
        """Serve ``sock`` on the running loop (which then owns it)."""
        channel = cls(sock, on_frame, on_lost)
        await channel._loop.create_unix_connection(lambda: channel, sock=sock)
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
        self._writer.close()
        self._on_lost()

    # -- sending ----------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        return self._lost or self._writer.closed

    def send(self, parts: list[bytes | memoryview]) -> None:
        """Queue one frame (on the loop); the queue is written once the loop has run what
        is ready."""
        if self.closing:
            return
        if not self._outgoing:
            self._loop.call_soon(self._flush)
        self._outgoing += parts

    def send_now(self, parts: list[bytes | memoryview]) -> None:
        """Write one frame now, from any thread (never blocks: see SocketWriter)."""
        self._writer.write(parts)

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        if outgoing:
            self._writer.write(outgoing)

    async def drain(self) -> None:
        """Return once the peer has read enough of what was sent (or has gone)."""
        self._flush()
        await self._writer.drain()

    def close(self) -> None:
        self._flush()  # what was queued goes out before the end
        self._writer.close()
        if self._transport is not None:
            self._transport.close()
