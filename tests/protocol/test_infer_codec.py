"""The V2 request/response codec, as tables of input -> expected."""

import ml_dtypes
import numpy as np
import pytest
from tritonclient.http import InferResult

from conveyor.errors import InvalidInput, Unsupported
from conveyor.protocol import infer
from conveyor.protocol.datatypes import DATATYPES, numpy_dtype
from conveyor.protocol.request import InferenceRequest


def sample(datatype: str, shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    count = int(np.prod(shape))
    if datatype == "BYTES":
        values = [b"", b"\xff\x00not utf-8", b"abc", "é".encode(), b"x" * 5, b"z"]
        return np.array((values * count)[:count], dtype=object).reshape(shape)
    if datatype == "BOOL":
        return (np.arange(count) % 2 == 0).reshape(shape)
    dtype = numpy_dtype(datatype)
    return np.arange(count).astype(dtype).reshape(shape)


def utf8_sample(datatype: str) -> np.ndarray:
    if datatype == "BYTES":
        return np.array([b"", "é".encode(), b"abc", b"", b"d", b"ee"], dtype=object).reshape(2, 3)
    return sample(datatype)


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    assert actual.tolist() == expected.tolist()


@pytest.mark.parametrize("datatype", DATATYPES)
@pytest.mark.parametrize("binary_data", [True, False])
def test_request_round_trip(datatype: str, binary_data: bool) -> None:
    value = sample(datatype) if binary_data else utf8_sample(datatype)
    extra = np.arange(3, dtype=np.float32)
    body, header_length = infer.encode_request(
        {"A": value, "B": extra},
        outputs=["Y"],
        request_id="r1",
        parameters={"priority": 2},
        binary_data=binary_data,
    )
    assert (header_length is not None) == binary_data
    request = infer.decode_request(body, header_length)
    assert request.id == "r1"
    assert request.request.outputs == ["Y"]
    assert request.wants_binary("Y") is binary_data
    assert request.request.priority == -1
    assert_same(request.request.inputs["A"], value)
    assert_same(request.request.inputs["B"], extra)


@pytest.mark.parametrize("datatype", DATATYPES)
@pytest.mark.parametrize("binary_data", [True, False])
def test_response_readable_by_tritonclient(datatype: str, binary_data: bool) -> None:
    value = sample(datatype) if binary_data else utf8_sample(datatype)
    request = infer.DecodedInfer(InferenceRequest("m", {}, id="7"), binary_data_output=binary_data)
    body, header_length = infer.encode_response("m", "1", request, {"OUT": value})
    result = InferResult.from_response_body(body, header_length=header_length)
    assert result.get_response()["id"] == "7"
    got = result.as_numpy("OUT")
    if datatype == "BF16":
        # tritonclient 2.41 reads BF16 as float32 (numpy has no bfloat16).
        assert got.astype(np.float32).tolist() == value.astype(np.float32).tolist()
    elif datatype == "BYTES" and not binary_data:
        assert got.tolist() == [[e.decode() for e in row] for row in value.tolist()]
    else:
        assert got.tolist() == value.tolist()
    header, outputs = infer.decode_response(body, header_length)
    assert header["model_name"] == "m"
    assert_same(outputs["OUT"], value)


def test_output_binary_choice_follows_triton() -> None:
    request = infer.decode_request(
        b'{"inputs": [], "outputs": [{"name": "a", "parameters": {"binary_data": true}},'
        b' {"name": "b"}], "parameters": {"binary_data_output": false}}',
        None,
    )
    assert request.wants_binary("a") and not request.wants_binary("b")
    results = {"a": np.zeros(2, np.int32), "b": np.ones(2, np.int64)}
    body, header_length = infer.encode_response("m", "1", request, results)
    result = InferResult.from_response_body(body, header_length=header_length)
    assert result.get_output("a")["parameters"] == {"binary_data_size": 8}
    assert result.get_output("b")["data"] == [1, 1]


def test_nested_json_data() -> None:
    body = (
        b'{"inputs": [{"name": "x", "datatype": "INT32", "shape": [2, 2],'
        b' "data": [[1, 2], [3, 4]]},'
        b' {"name": "s", "datatype": "BYTES", "shape": [1, 2], "data": [["a", ""]]}]}'
    )
    request = infer.decode_request(body, None)
    assert request.request.inputs["x"].tolist() == [[1, 2], [3, 4]]
    assert request.request.inputs["s"].tolist() == [[b"a", b""]]


def test_binary_inputs_are_views_of_the_body() -> None:
    value = np.arange(16, dtype=np.float32)
    body, header_length = infer.encode_request({"x": value})
    request = infer.decode_request(body, header_length)
    assert request.request.inputs["x"].base is not None
    assert not request.request.inputs["x"].flags.writeable


def test_json_bf16_and_fp16_output_values() -> None:
    value = np.array([1.5, -2.25], dtype=ml_dtypes.bfloat16)
    request = infer.DecodedInfer(InferenceRequest("m", {}))
    body, _ = infer.encode_response("m", "1", request, {"o": value})
    assert b'"data":[1.5,-2.25]' in body


def tensor(datatype: str, shape: list, **extra: object) -> dict:
    return {"name": "x", "datatype": datatype, "shape": shape, **extra}


def request_body(*tensors: dict, **extra: object) -> bytes:
    import orjson

    return orjson.dumps({"inputs": list(tensors), **extra})


ERRORS = [
    (b"{not json", None, "not valid JSON"),
    (b"[1, 2]", None, "must be a JSON object"),
    (b"{}", None, "'inputs' must be a list"),
    (request_body(tensor("FP99", [1], data=[1])), None, "unknown datatype 'FP99'"),
    (request_body(tensor("FP32", [2], data=[1.0])), None, r"shape \[2\] needs 2 elements"),
    (request_body(tensor("FP32", [-1], data=[1.0])), None, "integers >= 0"),
    (request_body(tensor("FP32", [2], data=[[1.0], [2.0, 3.0]])), None, "ragged"),
    (request_body(tensor("INT32", [1], data=[1.5])), None, "must be integers"),
    (request_body(tensor("UINT8", [1], data=[256])), None, "out of range for UINT8"),
    (request_body(tensor("INT8", [1], data=[-129])), None, "out of range for INT8"),
    (request_body(tensor("BOOL", [1], data=[1])), None, "true/false"),
    (request_body(tensor("FP32", [1], data=["a"])), None, "must be numbers"),
    (request_body(tensor("BYTES", [1], data=[1])), None, "must be a string"),
    (request_body(tensor("FP32", [1])), None, "no 'data' and no binary_data_size"),
    (
        request_body(tensor("FP32", [1], data=[1]), tensor("FP32", [1], data=[1])),
        None,
        "more than once",
    ),
    (request_body(tensor("FP32", [1], data=[1]), id=5), None, "'id' must be a string"),
    (request_body(tensor("FP32", [1], data=[1]), outputs=[{"nam": "y"}]), None, "string 'name'"),
    (request_body(tensor("FP32", [1], data=[1]), parameters={"timeout": -1}), None, "'timeout'"),
]


@pytest.mark.parametrize(("body", "header_length", "message"), ERRORS)
def test_request_errors(body: bytes, header_length: int | None, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        infer.decode_request(body, header_length)


def binary_request(tensors: list[dict], tail: bytes) -> tuple[bytes, int]:
    header = request_body(*tensors)
    return header + tail, len(header)


@pytest.mark.parametrize(
    ("tensors", "tail", "message"),
    [
        (
            [tensor("FP32", [4], parameters={"binary_data_size": 16})],
            b"\0" * 12,
            "runs past the end",
        ),
        (
            [tensor("FP32", [2], parameters={"binary_data_size": 8})],
            b"\0" * 12,
            "add up to 8 bytes but 12",
        ),
        (
            [tensor("FP32", [3], parameters={"binary_data_size": 8})],
            b"\0" * 8,
            "needs 12 bytes but binary_data_size is 8",
        ),
        (
            [tensor("FP32", [10**12], parameters={"binary_data_size": 8})],
            b"\0" * 8,
            "needs 4000000000000 bytes",
        ),
        ([tensor("FP32", [1], parameters={"binary_data_size": -4})], b"", "integer >= 0"),
        (
            [tensor("BYTES", [1], parameters={"binary_data_size": 4})],
            b"\x09\0\0\0",
            "length prefix says 9",
        ),
        (
            [tensor("FP32", [1], data=[1.0], parameters={"binary_data_size": 4})],
            b"\0" * 4,
            "both 'data'",
        ),
    ],
)
def test_binary_errors(tensors: list[dict], tail: bytes, message: str) -> None:
    body, header_length = binary_request(tensors, tail)
    with pytest.raises(InvalidInput, match=message):
        infer.decode_request(body, header_length)


def test_header_length_past_the_body() -> None:
    from conveyor.protocol.binary import parse_header_length

    with pytest.raises(InvalidInput, match="only 3 bytes"):
        parse_header_length(b"10", 3)
    with pytest.raises(InvalidInput, match="non-negative integer"):
        parse_header_length("-1", 3)
    assert parse_header_length(None, 3) is None


@pytest.mark.parametrize("parameters", [{"classification": 3}])
def test_unsupported_extensions_are_refused(parameters: dict) -> None:
    with pytest.raises(Unsupported):
        infer.decode_request(
            request_body(tensor("FP32", [1], data=[1], parameters=parameters)), None
        )
    body = request_body(
        tensor("FP32", [1], data=[1]), outputs=[{"name": "y", "parameters": parameters}]
    )
    if "classification" in parameters:  # implemented for a requested output
        assert infer.decode_request(body, None).classifications == {"y": 3}
        return
    with pytest.raises(Unsupported):
        infer.decode_request(body, None)


def test_non_utf8_bytes_output_in_json_says_use_binary() -> None:
    request = infer.DecodedInfer(InferenceRequest("m", {}))
    with pytest.raises(InvalidInput, match="binary_data: true"):
        infer.encode_response("m", "1", request, {"o": np.array([b"\xff"], dtype=object)})


def test_json_64_bit_integers_are_exact() -> None:
    big = [2**64 - 1, 1, 2**63 + 5]
    request = infer.decode_request(request_body(tensor("UINT64", [3], data=big)), None)
    assert request.request.inputs["x"].tolist() == big
    small = [-(2**63), 2**63 - 1]
    request = infer.decode_request(request_body(tensor("INT64", [2], data=small)), None)
    assert request.request.inputs["x"].tolist() == small
    with pytest.raises(InvalidInput, match="out of range for INT64"):
        infer.decode_request(request_body(tensor("INT64", [2], data=[2**63, -1])), None)
    with pytest.raises(InvalidInput, match="must be integers"):
        infer.decode_request(request_body(tensor("UINT64", [2], data=[2**64 - 1, 0.5])), None)


def test_shared_memory_tensors_are_located_not_decoded() -> None:
    where = {"shared_memory_region": "r", "shared_memory_byte_size": 8, "shared_memory_offset": 4}
    body = request_body(
        tensor("FP32", [2], parameters=where),
        outputs=[{"name": "y", "parameters": {**where, "shared_memory_offset": 0}}],
    )
    decoded = infer.decode_request(body, None)
    assert decoded.request.inputs == {}
    placed = decoded.shared_memory.inputs["x"]
    assert (placed.location.region, placed.location.byte_size, placed.location.offset) == (
        "r",
        8,
        4,
    )
    assert placed.datatype == "FP32" and placed.shape == (2,)
    assert decoded.shared_memory.outputs["y"].parameters() == {
        "shared_memory_region": "r",
        "shared_memory_byte_size": 8,
    }
    with pytest.raises(InvalidInput, match="shared_memory_byte_size"):
        infer.decode_request(
            request_body(tensor("FP32", [2], parameters={"shared_memory_region": "r"})), None
        )
    with pytest.raises(InvalidInput, match="also carries data"):
        infer.decode_request(request_body(tensor("FP32", [2], data=[1, 2], parameters=where)), None)
