"""why_unparseable names the field at fault, whichever protobuf release parsed the bytes."""

from __future__ import annotations

import pytest

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc.diagnose import why_unparseable

GOOD = pb.ModelInferRequest(
    model_name="tiny",
    inputs=[pb.ModelInferRequest.InferInputTensor(name="INPUT0", datatype="FP32", shape=[1])],
    raw_input_contents=[b"\0\0\0\0"],
).SerializeToString()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (GOOD, None),
        (GOOD.replace(b"tiny", b"ti\xffy"), "field 'model_name' is not valid UTF-8"),
        (GOOD.replace(b"INPUT0", b"INPU\xff\xfe"), "field 'inputs[0].name' is not valid UTF-8"),
        (GOOD[:-2], "field 'raw_input_contents[0]' runs past the end of the message"),
        (b"\x00\x01", "field number 0 at byte 1 (not a protobuf message)"),
        (b"\x0b", "field 'model_name' uses wire type 3, which this message does not use"),
        (b"\x08\xff", "truncated varint"),
    ],
)
def test_names_the_field_at_fault(data: bytes, expected: str | None) -> None:
    assert why_unparseable(pb.ModelInferRequest.DESCRIPTOR, data) == expected
