"""conveyor.ipc.channel: whole frames over a blocking socket pair, fds riding along."""

from __future__ import annotations

import os
import socket
import tempfile
import threading

import numpy as np
import pytest

from conveyor.ipc.channel import Channel
from conveyor.ipc.frames import frame_parts


@pytest.fixture
def pair() -> tuple[Channel, Channel]:
    left, right = socket.socketpair()
    ends = Channel(left), Channel(right)
    yield ends
    for end in ends:
        end.close()


def test_a_message_with_a_large_tensor_arrives_whole(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    tensor = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: out of band, past the buffer
    writing = threading.Thread(target=sender.send, args=({"tensor": tensor, "tag": "x"},))
    writing.start()
    message, fds = receiver.recv(timeout=10)
    writing.join(10)
    assert fds == []
    assert message["tag"] == "x"
    np.testing.assert_array_equal(message["tensor"], tensor)


def test_file_descriptors_ride_with_their_frame(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    with tempfile.TemporaryFile() as file:
        file.write(b"shared")
        file.flush()
        sender.send("here", [file.fileno()])
        message, fds = receiver.recv(timeout=10)
    assert message == "here"
    assert len(fds) == 1
    try:
        assert os.pread(fds[0], 6, 0) == b"shared"  # the same open file, in the receiver
    finally:
        os.close(fds[0])


def test_a_frame_split_into_single_bytes_is_read_whole(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    data = b"".join(frame_parts(("split", 7)))
    for index in range(len(data)):  # every byte its own send: every read boundary
        sender.sock.send(data[index : index + 1])
    assert receiver.recv(timeout=10) == (("split", 7), [])


def test_a_quiet_channel_times_out_and_a_closed_one_ends(
    pair: tuple[Channel, Channel],
) -> None:
    sender, receiver = pair
    with pytest.raises(TimeoutError):
        receiver.recv(timeout=0.01)
    sender.sock.send(b"".join(frame_parts("cut"))[:5])  # part of a frame, then gone
    sender.sock.shutdown(socket.SHUT_RDWR)
    with pytest.raises(EOFError, match="closed the connection"):
        receiver.recv(timeout=10)


def test_hang_up_wakes_a_blocked_reader(pair: tuple[Channel, Channel]) -> None:
    _, receiver = pair
    failures: list[BaseException] = []

    def read() -> None:
        try:
            receiver.recv()
        except BaseException as exc:
            failures.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    receiver.hang_up()
    reader.join(10)
    assert not reader.is_alive()
    assert len(failures) == 1 and isinstance(failures[0], EOFError)
