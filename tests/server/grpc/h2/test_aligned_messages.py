"""A large message is received into a buffer whose end is 64-byte aligned, so an infer
request's last raw tensor reaches the model as a view of the message, never copied to
fix its alignment, whatever the fields before it."""

from __future__ import annotations

import numpy as np
import pytest

from conveyor.protocol.grpc import converters, wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.server.grpc.h2.calls import end_aligned_buffer


@pytest.mark.parametrize("length", [1, 63, 64, 65, 4 * 1024 * 1024 + 37])
def test_the_buffer_ends_on_64_bytes(length: int) -> None:
    buffer = end_aligned_buffer(length)
    address = np.frombuffer(buffer, np.uint8).ctypes.data
    assert len(buffer) == length and (address + length) % 64 == 0
    buffer[-1] = 7  # writable
    assert buffer[-1] == 7


@pytest.mark.parametrize("id_length", range(8))  # moves the tensor to every offset mod 8
@pytest.mark.parametrize("datatype", ["FP32", "FP64", "INT64"])
def test_the_last_tensor_is_a_view_of_the_received_message(id_length: int, datatype: str) -> None:
    values = np.arange(300_000).astype(np.dtype(datatype.replace("FP", "float").lower()))
    request = pb.ModelInferRequest(model_name="identity", id="x" * id_length)
    tensor = request.inputs.add(name="INPUT0", datatype=datatype)
    tensor.shape.append(values.size)
    request.raw_input_contents.append(values.tobytes())
    data = request.SerializeToString()
    received = end_aligned_buffer(len(data))
    received[:] = data
    message, raw = wire.split_raw(received, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
    array = converters.infer_call(message, raw).request.inputs["INPUT0"]
    np.testing.assert_array_equal(array, values)
    assert not array.flags.owndata  # a view of the message: not copied to align it
    assert np.shares_memory(array, np.frombuffer(received, np.uint8))
