"""The frames between front-end and engine processes keep every tensor exactly."""

from __future__ import annotations

import pickle
import socket
import threading

import numpy as np
import pytest

from conveyor.errors import ModelNotFound
from conveyor.ipc import frames as wire
from conveyor.ipc.channel import Channel
from conveyor.protocol.datatypes import DATATYPES
from conveyor.protocol.request import InferenceRequest
from conveyor.server.workers.messages import Infer, Reply
from tests.tensors import sample


def round_trip(message: object) -> object:
    parts = wire.frame_parts(message)
    left, right = socket.socketpair()
    sender, receiver = Channel(left), Channel(right)
    # A frame larger than the socket's buffer needs its reader running while it is sent.
    writing = threading.Thread(target=sender.send, args=(message,))
    writing.start()
    try:
        received, fds = receiver.recv()
        assert fds == []
        writing.join(10)
    finally:
        sender.close()
        receiver.close()
    again = pickle.loads(bytes(parts[1]), buffers=parts[2:])
    assert type(again) is type(received)
    return received


@pytest.mark.parametrize("datatype", DATATYPES)
def test_every_datatype_arrives_as_it_left(datatype: str) -> None:
    array = sample(datatype)
    call = round_trip(Infer(7, InferenceRequest("m", {"x": array}, priority=-2)))
    assert isinstance(call, Infer)
    got = call.request.inputs["x"]
    assert got.dtype == array.dtype and got.shape == array.shape
    if array.dtype == object:
        assert got.tolist() == array.tolist()
    else:
        assert got.tobytes() == array.tobytes()
    assert call.request.priority == -2


def test_large_tensors_travel_out_of_band_and_odd_layouts_survive() -> None:
    big = np.arange(1 << 16, dtype=np.float32)
    assert len(wire.frame_parts({"x": big})) == 3  # prefix, pickle, the tensor itself
    strided = np.arange(12).reshape(3, 4)[:, ::2]
    swapped = np.arange(6, dtype=">i4")
    reply = round_trip(Reply(1, value={"big": big, "strided": strided, "swapped": swapped}))
    assert isinstance(reply, Reply)
    for name, array in (("big", big), ("strided", strided), ("swapped", swapped)):
        np.testing.assert_array_equal(reply.value[name], array)
        assert reply.value[name].dtype == array.dtype


def test_an_error_keeps_its_type_and_message() -> None:
    reply = round_trip(Reply(3, error=ModelNotFound("model 'x' is not in the repository")))
    assert isinstance(reply, Reply) and isinstance(reply.error, ModelNotFound)
    assert reply.error.message == "model 'x' is not in the repository"
