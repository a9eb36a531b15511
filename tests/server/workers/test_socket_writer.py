"""Many threads writing frames at once over one socket: every frame arrives whole, once,
each thread's in the order it wrote them, also while the reader lags (the backlog)."""

from __future__ import annotations

import asyncio
import pickle
import socket
import threading
import time

from conveyor.ipc import frames as wire
from conveyor.server.workers.messages import StreamItem
from conveyor.server.workers.socket_writer import SocketWriter

THREADS = 6
FRAMES = 300


def read_all(sock: socket.socket, expected: int, lag_s: float) -> list[tuple[int, int]]:
    reader = wire.FrameReader()
    got: list[tuple[int, int]] = []
    time.sleep(lag_s)  # the writers fill the socket first: frames wait in the backlog
    while len(got) < expected:
        data = sock.recv(1 << 16)
        assert data, "the writer closed early"
        for _, meta, buffers in reader.feed(data):
            message = pickle.loads(meta, buffers=buffers)
            got.append(message.item)
    return got


async def write_from_threads(writer: SocketWriter, payload: bytes) -> None:
    def write(thread: int) -> None:
        for index in range(FRAMES):
            writer.write(wire.frame_parts(StreamItem(0, (thread, index, payload))))

    threads = [threading.Thread(target=write, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        await asyncio.sleep(0.01)  # the loop runs: it writes the backlog as the socket drains


def test_frames_from_many_threads_arrive_whole_once_and_in_order() -> None:
    here, there = socket.socketpair()
    there.settimeout(30)
    payload = bytes(range(256)) * 40  # 10 KiB a frame: the socket's buffer fills at once
    received: list[tuple[int, int]] = []
    reading = threading.Thread(
        target=lambda: received.extend(
            (t, i) for t, i, _ in read_all(there, THREADS * FRAMES, lag_s=0.3)
        )
    )
    reading.start()

    async def main() -> None:
        writer = SocketWriter(here, asyncio.get_running_loop())
        await write_from_threads(writer, payload)
        while reading.is_alive():  # keep the loop running until the backlog is written
            await asyncio.sleep(0.01)
        writer.close()

    asyncio.run(main())
    reading.join(30)
    here.close()
    there.close()
    assert sorted(received) == [(t, i) for t in range(THREADS) for i in range(FRAMES)]
    for thread in range(THREADS):
        assert [i for t, i in received if t == thread] == list(range(FRAMES))
