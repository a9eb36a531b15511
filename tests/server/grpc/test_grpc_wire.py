"""Hand framing of raw tensor bytes (wire.py) means exactly what protobuf would encode."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2 as triton

from conveyor.protocol.grpc import wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb


def request(*buffers: bytes) -> pb.ModelInferRequest:
    message = pb.ModelInferRequest(model_name="m", id="x")
    for index, buffer in enumerate(buffers):
        message.inputs.add(name=f"in{index}", datatype="UINT8", shape=[len(buffer)])
    message.parameters["timeout"].int64_param = 5
    return message


@pytest.mark.parametrize("size", [0, 10, wire.SMALL_MESSAGE, 3 * wire.SMALL_MESSAGE + 7])
def test_join_then_split_round_trips(size: int) -> None:
    buffers = [bytes(range(256)) * (size // 256) + b"\x01" * (size % 256), b"tail"]
    message = request(*buffers)
    arrays = [np.frombuffer(b, np.uint8) for b in buffers]
    data = wire.join_raw(message, wire.RAW_INPUT_FIELD, arrays)
    # protobuf reads it as the same message with the raw field filled
    expected = pb.ModelInferRequest()
    expected.CopyFrom(message)
    expected.raw_input_contents.extend(buffers)
    assert pb.ModelInferRequest.FromString(data) == expected
    assert triton.ModelInferRequest.FromString(data).raw_input_contents[0] == buffers[0]
    parsed, raw = wire.split_raw(data, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
    assert [bytes(r) for r in raw] == buffers
    assert parsed.model_name == "m" and parsed.parameters["timeout"].int64_param == 5
    assert [t.name for t in parsed.inputs] == ["in0", "in1"]


def test_big_message_tensors_are_views_not_copies() -> None:
    big = bytes(4 * wire.SMALL_MESSAGE)
    data = request(big).SerializeToString() + wire.join_raw(pb.ModelInferRequest(), 7, [big])
    _, raw = wire.split_raw(data, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
    assert isinstance(raw[0], memoryview) and raw[0].obj is data


def test_raw_fields_anywhere_in_the_message() -> None:
    # Fields may come in any order on the wire; protobuf's own output puts raw last.
    big = b"\x07" * (2 * wire.SMALL_MESSAGE)
    head = wire.join_raw(pb.ModelInferRequest(), wire.RAW_INPUT_FIELD, [big])
    data = head + request(big).SerializeToString()
    parsed, raw = wire.split_raw(data, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
    assert bytes(raw[0]) == big and parsed.id == "x"


@pytest.mark.parametrize("cut", [1, 3, 100])
def test_truncated_big_message_is_a_decode_error(cut: int) -> None:
    big = bytes(2 * wire.SMALL_MESSAGE)
    data = wire.join_raw(request(big), wire.RAW_INPUT_FIELD, [big])
    with pytest.raises(DecodeError):
        wire.split_raw(data[:-cut], pb.ModelInferRequest, wire.RAW_INPUT_FIELD)


def test_a_big_message_of_zero_bytes_is_refused_at_its_first_field() -> None:
    data = bytes(4 * 1024 * 1024)
    start = time.process_time()
    with pytest.raises(DecodeError, match="field number 0"):
        wire.split_raw(data, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
    assert time.process_time() - start < 0.5


def test_a_big_message_of_tiny_fields_costs_a_bounded_scan() -> None:
    """A million one-byte varint fields (all valid protobuf): the hand scan stops after a
    bounded number of fields and protobuf's C parser reads the rest, so no Python object is
    made per field."""
    tiny_fields = b"\x60\x00" * (1024 * 1024)  # field 12 (unknown to the message), varint 0
    tail = wire.join_raw(pb.ModelInferRequest(model_name="m"), wire.RAW_INPUT_FIELD, [b"ab"])
    data = tiny_fields + tail
    tracemalloc.start()
    try:
        start = time.process_time()
        parsed, raw = wire.split_raw(data, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
        elapsed = time.process_time() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert parsed.model_name == "m" and [bytes(r) for r in raw] == [b"ab"]
    assert elapsed < 1.0, elapsed
    assert peak < 8 * len(data), peak  # protobuf's own copy, not an object per field


def test_many_raw_elements_between_other_fields_keep_their_order() -> None:
    buffers = [bytes([index]) * (wire.SMALL_MESSAGE // 4) for index in range(8)]
    data = b"".join(
        request().SerializeToString() + wire.join_raw(pb.ModelInferRequest(), 7, [buffer])
        for buffer in buffers
    )
    parsed, raw = wire.split_raw(data, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
    assert [bytes(r) for r in raw] == buffers
    assert parsed.model_name == "m" and parsed.id == "x"
