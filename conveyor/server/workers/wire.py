"""Frames between a front-end process and the engine process: a pickle, tensors beside it.

A frame is ``<meta length u32><buffer count u32><buffer lengths u64...>``, then the pickled
message (protocol 5), then each out-of-band buffer as raw bytes. numpy arrays hand their
memory to pickle as out-of-band buffers, so a tensor is written to the socket as it lies
in memory and read back into one bytes object that the array then views: never encoded,
never converted per element.

Both directions carry the same three messages (:mod:`messages`); the blocking
:class:`BlockingConnection` carries control calls, :func:`read_frame` / :func:`frame_parts`
the multiplexed asynchronous ones.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
from typing import Any

_PREFIX = struct.Struct("<II")
_LENGTH = struct.Struct("<Q")
# A message (not its tensors) larger than this is a bug or a corrupt stream, not a request.
MAX_META_BYTES = 64 << 20


def frame_parts(message: object) -> list[bytes | memoryview]:
    """The frame of ``message`` as parts to write in order (tensors are not copied)."""
    buffers: list[pickle.PickleBuffer] = []
    meta = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    lengths = b"".join(_LENGTH.pack(r.nbytes) for r in raws)
    return [_PREFIX.pack(len(meta), len(raws)) + lengths, meta, *raws]


def _check(meta_length: int) -> None:
    if meta_length > MAX_META_BYTES:
        raise ConnectionError(f"a frame's message is {meta_length} bytes, over the limit")


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next message; IncompleteReadError once the peer has gone."""
    meta_length, count = _PREFIX.unpack(await reader.readexactly(_PREFIX.size))
    _check(meta_length)
    lengths = struct.unpack(f"<{count}Q", await reader.readexactly(8 * count)) if count else ()
    meta = await reader.readexactly(meta_length)
    buffers = [await reader.readexactly(n) for n in lengths]
    return pickle.loads(meta, buffers=buffers)


class BlockingConnection:
    """One end of a blocking socket: one whole frame out, one whole frame in."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self.sock = sock

    def send(self, message: object) -> None:
        # Control calls are small: one write, one system call.
        self.sock.sendall(b"".join(frame_parts(message)))

    def recv(self) -> Any:
        """The next message; EOFError once the peer has gone."""
        meta_length, count = _PREFIX.unpack(self._exactly(_PREFIX.size))
        _check(meta_length)
        lengths = struct.unpack(f"<{count}Q", self._exactly(8 * count)) if count else ()
        meta = self._exactly(meta_length)
        buffers = [self._exactly(n) for n in lengths]
        return pickle.loads(meta, buffers=buffers)

    def _exactly(self, size: int) -> bytearray:
        data = bytearray(size)
        view = memoryview(data)
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise EOFError("the other process closed the connection")
            got += n
        return data

    def close(self) -> None:
        self.sock.close()
