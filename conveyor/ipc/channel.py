"""One end of a blocking Unix stream socket that carries whole frames of :mod:`frames`.

File descriptors (shared-memory buffers, a new worker's socket) are passed with SCM_RIGHTS
on a frame's first bytes, so a buffer crosses the process boundary once and is then only
referred to by offsets.
"""

from __future__ import annotations

import array
import contextlib
import os
import pickle
import select
import socket
import struct
from collections.abc import Sequence
from typing import Any

from conveyor.ipc.frames import PICKLED, PREFIX, check_meta_length, frame_parts

_MAX_FDS = 4
_ANCILLARY = socket.CMSG_SPACE(_MAX_FDS * array.array("i").itemsize)


class Channel:
    """Not thread-safe: one frame out and one frame in at a time per channel."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self.sock = sock
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: object, fds: Sequence[int] = ()) -> None:
        """Raises OSError (BrokenPipeError, ConnectionResetError) when the peer is gone."""
        data = b"".join(frame_parts(message))  # control messages are small: one write
        if fds:
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
            sent = self.sock.sendmsg([data], ancillary)
            if sent < len(data):
                self.sock.sendall(memoryview(data)[sent:])
        else:
            self.sock.sendall(data)

    def readable(self, timeout: float | None) -> bool:
        """True once a frame (or end of file) can be read; False after ``timeout`` seconds."""
        wait = None if timeout is None else max(0, int(timeout * 1000))
        return bool(self._poll.poll(wait))

    def recv(self, timeout: float | None = None) -> tuple[Any, list[int]]:
        """The next message and the fds that came with it (the caller owns and closes them).

        Raises EOFError when the peer has gone, TimeoutError after ``timeout`` seconds.
        """
        if timeout is not None and not self.readable(timeout):
            raise TimeoutError
        try:
            data, ancillary, flags, _ = self.sock.recvmsg(
                PREFIX.size, _ANCILLARY, socket.MSG_CMSG_CLOEXEC
            )
        except ConnectionResetError:
            raise EOFError("the other process closed the connection") from None
        fds: list[int] = []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                received = array.array("i")
                received.frombytes(payload[: len(payload) - len(payload) % received.itemsize])
                fds.extend(received)
        try:
            if not data:
                raise EOFError("the other process closed the connection")
            if flags & socket.MSG_CTRUNC:
                raise OSError("more file descriptors arrived than a frame may carry")
            prefix = data + self._exactly(PREFIX.size - len(data))
            kind, meta_length, count = PREFIX.unpack(prefix)
            if kind != PICKLED:
                raise ConnectionError(f"a frame of kind {kind} on a channel, expected a pickle")
            check_meta_length(meta_length)
            lengths = struct.unpack(f"<{count}Q", self._exactly(8 * count)) if count else ()
            meta = self._exactly(meta_length)
            buffers = [self._exactly(n) for n in lengths]
            return pickle.loads(meta, buffers=buffers), fds
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise

    def _exactly(self, count: int) -> bytearray:
        buffer = bytearray(count)
        view = memoryview(buffer)
        got = 0
        while got < count:
            try:
                n = self.sock.recv_into(view[got:])
            except ConnectionResetError:
                n = 0
            if n == 0:
                raise EOFError("the other process closed the connection")
            got += n
        return buffer

    def hang_up(self) -> None:
        """Wake a thread blocked on this channel (it reads end of file); the fd stays open."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.sock.close()
