"""Property-based fuzzing of every decoder that reads bytes from the network.

Whatever arrives, a decoder either returns or raises InvalidInput (a ConveyorError); no
other exception escapes, and nothing it allocates is much larger than what it was given
(checked with tracemalloc: sizes in a request are checked before anything of that size
exists).
"""

from __future__ import annotations

import contextlib
import json
import struct
import tracemalloc
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conveyor.errors import ConveyorError
from conveyor.protocol import binary, bytes_codec, infer, json_codec
from conveyor.protocol.datatypes import DATATYPES
from conveyor.protocol.grpc import converters, wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)

datatypes = st.sampled_from(DATATYPES) | st.text(max_size=8)
huge = st.sampled_from([2**31, 2**32 + 1, 2**62, 2**63 - 1, 2**63, 2**64 + 7, 10**30])
dims = st.integers(-3, 6) | huge | st.integers(min_value=-(2**70), max_value=2**70)
shapes = st.lists(dims, max_size=5)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=6)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=25,
)
nested_data = st.recursive(
    st.integers(-300, 300)
    | st.floats(allow_nan=False, width=32)
    | st.booleans()
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=20,
)


def only_conveyor_errors(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except ConveyorError:
        return None


@FUZZ
@given(
    data=json_values,
    datatype=st.sampled_from(DATATYPES),
    shape=st.lists(st.integers(0, 6) | huge, max_size=4),
)
def test_json_data_decodes_or_says_why(data: Any, datatype: str, shape: list[int]) -> None:
    def decode() -> Any:  # the shape is checked first, as decode_request does
        checked = json_codec.parse_shape(shape, "input 'x'")
        return json_codec.decode_data(data, datatype, checked, "input 'x'")

    result = only_conveyor_errors(decode)
    if result is not None:
        assert result.shape == tuple(shape)


@FUZZ
@given(data=nested_data, datatype=st.sampled_from(DATATYPES))
def test_json_data_with_its_own_shape(data: Any, datatype: str) -> None:
    shape: tuple[int, ...] = ()
    with contextlib.suppress(ValueError):
        shape = np.array(data, dtype=object).shape
    only_conveyor_errors(json_codec.decode_data, data, datatype, tuple(shape), "input 'x'")


@FUZZ
@given(
    buffer=st.binary(max_size=64),
    count=st.none() | st.integers(0, 8) | huge,
    offset=st.integers(-4, 70),
    size=st.none() | st.integers(-4, 70) | huge,
)
def test_bytes_codec_never_reads_or_allocates_past_the_buffer(
    buffer: bytes, count: int | None, offset: int, size: int | None
) -> None:
    result = only_conveyor_errors(
        lambda: bytes_codec.decode(buffer, count, offset=offset, size=size)
    )
    if result is not None:
        assert sum(len(item) for item in result) <= len(buffer)


@FUZZ
@given(
    elements=st.lists(st.binary(max_size=8), max_size=6),
    claimed=st.lists(st.integers(0, 2**32 - 1), max_size=3),
)
def test_bytes_codec_with_lying_length_prefixes(elements: list[bytes], claimed: list[int]) -> None:
    buffer = b"".join(struct.pack("<I", len(e)) + e for e in elements)
    buffer += b"".join(struct.pack("<I", n) for n in claimed)
    only_conveyor_errors(bytes_codec.decode, buffer, len(elements) + len(claimed))


@FUZZ
@given(
    tail=st.binary(max_size=64),
    offset=st.integers(0, 64),
    size=st.integers(0, 80) | huge,
    datatype=st.sampled_from(DATATYPES),
    shape=shapes.filter(lambda s: all(d >= 0 for d in s)),
)
def test_binary_tensor_checks_sizes_before_reading(
    tail: bytes, offset: int, size: int, datatype: str, shape: list[int]
) -> None:
    reader = binary.TailReader(tail)
    try:
        start = reader.take(size, "input 'x'")
    except ConveyorError:
        return

    def decode() -> Any:
        checked = json_codec.parse_shape(shape, "input 'x'")
        return binary.tensor(tail, start, size, datatype, checked, "input 'x'")

    only_conveyor_errors(decode)


def tensor_objects() -> st.SearchStrategy[Any]:
    fields = st.fixed_dictionaries(
        {"name": st.text(max_size=4) | json_values, "datatype": datatypes},
        optional={
            "shape": shapes | json_values,
            "data": nested_data | json_values,
            "parameters": st.fixed_dictionaries(
                {},
                optional={
                    "binary_data_size": st.integers(-2, 40) | huge | json_values,
                    "binary_data": json_values,
                },
            )
            | json_values,
        },
    )
    return fields | json_values


requests = st.fixed_dictionaries(
    {"inputs": st.lists(tensor_objects(), max_size=4) | json_values},
    optional={
        "id": st.text(max_size=4) | json_values,
        "outputs": st.lists(
            st.fixed_dictionaries(
                {"name": st.text(max_size=3)}, optional={"parameters": json_values}
            ),
            max_size=3,
        )
        | json_values,
        "parameters": st.dictionaries(
            st.sampled_from(["priority", "timeout", "binary_data_output", "sequence_id", "x"]),
            json_values,
            max_size=3,
        )
        | json_values,
    },
)


@FUZZ
@given(request=requests, tail=st.binary(max_size=48), header_cut=st.none() | st.integers(-3, 3))
def test_infer_requests_decode_or_say_why(
    request: Any, tail: bytes, header_cut: int | None
) -> None:
    header = json.dumps(request).encode()  # stdlib: writes ints past 64 bits too
    body = header + tail
    length: str | None = None if header_cut is None else str(max(0, len(header) + header_cut))
    try:
        header_length = binary.parse_header_length(length, len(body))
        infer.decode_request(body, header_length if tail or header_length else None)
    except ConveyorError:
        pass


@FUZZ
@given(body=st.binary(max_size=200), header_length=st.none() | st.text(max_size=6))
def test_arbitrary_bytes_as_an_infer_body(body: bytes, header_length: str | None) -> None:
    with contextlib.suppress(ConveyorError):
        infer.decode_request(body, binary.parse_header_length(header_length, len(body)))


@FUZZ
@given(data=st.binary(max_size=300))
def test_grpc_wire_split_raw_on_arbitrary_bytes(data: bytes) -> None:
    from google.protobuf.message import DecodeError

    try:
        message, raw = wire.split_raw(data, pb.ModelInferRequest, wire.RAW_INPUT_FIELD)
    except DecodeError:
        return  # answered INVALID_ARGUMENT by the servicer (tests/reliability)
    only_conveyor_errors(converters.infer_call, message, raw)


@FUZZ
@given(
    tensors=st.lists(
        st.tuples(
            st.text(max_size=3),
            datatypes,
            st.lists(st.integers(0, 2**63 - 1), max_size=3),
            st.binary(max_size=24),
        ),
        max_size=3,
    ),
    model=st.text(max_size=4),
)
def test_grpc_infer_requests_decode_or_say_why(tensors: list, model: str) -> None:
    request = pb.ModelInferRequest(model_name=model)
    for name, datatype, shape, raw in tensors:
        request.inputs.add(name=name, datatype=datatype, shape=shape)
        request.raw_input_contents.append(raw)
    only_conveyor_errors(converters.infer_call, request)


# -- allocation -------------------------------------------------------------------------


HOSTILE_SIZES = [
    # shape x datatype far beyond memory, tiny bodies
    {"name": "x", "datatype": "FP64", "shape": [2**62, 2**62], "data": [1.0]},
    {"name": "x", "datatype": "FP32", "shape": [2**40], "parameters": {"binary_data_size": 4}},
    {"name": "x", "datatype": "BYTES", "shape": [2**40], "parameters": {"binary_data_size": 4}},
    {"name": "x", "datatype": "BYTES", "shape": [2**40], "data": ["a"]},
    {"name": "x", "datatype": "INT8", "shape": [2**63, 2], "parameters": {"binary_data_size": 0}},
]


@pytest.mark.parametrize("tensor", HOSTILE_SIZES)
def test_sizes_are_checked_before_anything_of_that_size_exists(tensor: dict) -> None:
    header = orjson.dumps({"inputs": [tensor]})
    body = header + struct.pack("<I", 2**32 - 1)  # a BYTES prefix claiming 4 GiB
    tracemalloc.start()
    try:
        with pytest.raises(ConveyorError):
            infer.decode_request(body, len(header))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak


@settings(max_examples=60, deadline=None, derandomize=True)
@given(request=requests, tail=st.binary(max_size=48))
def test_decoding_allocates_little_more_than_the_body(request: Any, tail: bytes) -> None:
    header = json.dumps(request).encode()  # stdlib: writes ints past 64 bits too
    body = header + tail
    tracemalloc.start()
    try:
        with contextlib.suppress(ConveyorError):
            infer.decode_request(body, len(header) if tail else None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Python objects for the parsed JSON cost ~100x the text; nothing near a claimed size.
    assert peak < 200 * len(body) + 200_000, (peak, len(body))


def test_deeply_nested_data_is_refused_not_a_crash() -> None:
    for depth in (70, 500, 5000, 100_000):
        header = b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":' + b"[" * depth
        header += b"1" + b"]" * depth + b"}]}"
        with pytest.raises(ConveyorError):
            infer.decode_request(header, None)
