"""Hostile requests against the real server, HTTP and gRPC: every one is answered 4xx /
INVALID_ARGUMENT (NOT_FOUND for names that do not exist) with a message naming what was
wrong, and the server answers the next good request."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator

import grpc
import numpy as np
import pytest

from conveyor.examples import onnx_models
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder
from tests.reliability.rel_util import raw_exchange

LIMIT = 1024 * 1024  # --max-body-bytes and --grpc-max-message-bytes here

ECHO_BYTES = """
class Model:
    def infer(self, inputs):
        return {"OUTPUT0": inputs["INPUT0"]}
"""
ECHO_BYTES_CONFIG = """
backend = "python"
[[inputs]]
name = "INPUT0"
datatype = "BYTES"
shape = [-1]
[[outputs]]
name = "OUTPUT0"
datatype = "BYTES"
shape = [-1]
"""
BATCHED_CONFIG = """
backend = "onnxruntime"
max_batch_size = 4
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("hostile")
    onnx_models.tiny(root / "tiny" / "1" / "model.onnx")
    onnx_models.tiny(root / "batched" / "1" / "model.onnx")
    (root / "batched" / "config.toml").write_text(BATCHED_CONFIG)
    RepoBuilder(root).python("words", ECHO_BYTES, ECHO_BYTES_CONFIG)
    args = [
        "--max-body-bytes",
        str(LIMIT),
        "--grpc-max-message-bytes",
        str(LIMIT),
    ]
    with run_server(root, extra_args=args) as running:
        yield running
        assert running.process.poll() is None, running.output()
        assert running.stop() == 0


def tensor(**fields) -> dict:  # type: ignore[no-untyped-def]
    base = {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [0.5] * 16}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}


def body(*tensors: dict, **extra) -> bytes:  # type: ignore[no-untyped-def]
    return json.dumps({"inputs": list(tensors), **extra}).encode()


def binary_body(tensors: list[dict], tail: bytes) -> tuple[bytes, int]:
    header = body(*tensors)
    return header + tail, len(header)


FLOATS = np.zeros(16, np.float32).tobytes()  # 64 bytes
nested = b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],"data":'
# (model, body, Inference-Header-Content-Length, expected status, words the error must say)
HTTP_CASES = {
    "truncated JSON": (
        "tiny",
        b'{"inputs": [{"name": "INPUT0", "datat',
        None,
        400,
        "not valid JSON",
    ),
    "empty body": ("tiny", b"", None, 400, "not valid JSON"),
    "not an object": ("tiny", b"[1, 2]", None, 400, "JSON object"),
    "inputs not a list": ("tiny", b'{"inputs": {"a": 1}}', None, 400, "'inputs' must be a list"),
    "input not an object": ("tiny", body(5), None, 400, "inputs[0] must be an object"),
    "name not a string": ("tiny", body(tensor(name=5)), None, 400, "'name' must be a string"),
    "datatype not a string": ("tiny", body(tensor(datatype=[1])), None, 400, "'datatype'"),
    "unknown datatype": (
        "tiny",
        body(tensor(datatype="FP128")),
        None,
        400,
        "unknown datatype 'FP128'",
    ),
    "negative shape": ("tiny", body(tensor(shape=[-1, 16])), None, 400, "'shape'"),
    "non-integer shape": ("tiny", body(tensor(shape=[1.5, 16])), None, 400, "'shape'"),
    "shape not a list": ("tiny", body(tensor(shape="1,16")), None, 400, "'shape'"),
    "boolean shape": ("tiny", body(tensor(shape=[True, 16])), None, 400, "'shape'"),
    "huge shape": ("tiny", body(tensor(shape=[2**62, 2**62])), None, 400, "shape"),
    "shape beyond 64 bits": ("tiny", body(tensor(shape=[2**70, 16])), None, 400, "'shape'"),
    "shape x datatype over 64 bits": (
        "tiny",
        *binary_body(
            [
                tensor(
                    datatype="FP64",
                    shape=[2**58, 64],
                    data=...,
                    parameters={"binary_data_size": 64},
                )
            ],
            FLOATS,
        ),
        400,
        "shape",
    ),
    "count disagrees with shape": (
        "tiny",
        body(tensor(data=[1.0] * 3)),
        None,
        400,
        "needs 16 elements",
    ),
    "wrong data type": (
        "tiny",
        body(tensor(data=["a"] * 16)),
        None,
        400,
        "FP32 data must be numbers",
    ),
    "data not a list": ("tiny", body(tensor(data={"x": 1})), None, 400, "'data' must be a list"),
    "ragged data": ("tiny", body(tensor(data=[[1.0] * 8, [1.0] * 7])), None, 400, "ragged"),
    "float overflows FP32": (
        "tiny",
        body(tensor(data=[1e39] * 16)),
        None,
        400,
        "out of range for FP32",
    ),
    "deeply nested data": (
        "tiny",
        nested + b"[" * 5000 + b"1" + b"]" * 5000 + b"}]}",
        None,
        400,
        "not valid JSON",
    ),
    "nested beyond numpy's 64 dims": (
        "tiny",
        nested + b"[" * 100 + b"1" + b"]" * 100 + b"}]}",
        None,
        400,
        "INPUT0",
    ),
    "binary overrun": (
        "tiny",
        *binary_body([tensor(data=..., parameters={"binary_data_size": 128})], FLOATS),
        400,
        "runs past the end",
    ),
    "binary underrun": (
        "tiny",
        *binary_body([tensor(data=..., parameters={"binary_data_size": 64})], FLOATS + b"more"),
        400,
        "add up to",
    ),
    "binary size disagrees with shape": (
        "tiny",
        *binary_body([tensor(data=..., parameters={"binary_data_size": 60})], FLOATS[:60]),
        400,
        "needs 64 bytes",
    ),
    "negative binary size": (
        "tiny",
        *binary_body([tensor(data=..., parameters={"binary_data_size": -4})], FLOATS),
        400,
        "binary_data_size",
    ),
    "header length past the body": (
        "tiny",
        body(tensor()),
        10**9,
        400,
        "Inference-Header-Content-Length",
    ),
    "BYTES prefix past the end": (
        "words",
        *binary_body(
            [tensor(datatype="BYTES", shape=[1], data=..., parameters={"binary_data_size": 6})],
            struct.pack("<I", 2**31) + b"ab",
        ),
        400,
        "length prefix",
    ),
    "non-UTF-8 name": (
        "tiny",
        b'{"inputs":[{"name":"IN\xff\xfe","datatype":"FP32","shape":[1],"data":[1]}]}',
        None,
        400,
        "not valid JSON",
    ),
    "very long name": (
        "tiny",
        body(tensor(), tensor(name="N" * 100_000)),
        None,
        400,
        "has no input",
    ),
    "duplicate inputs": ("tiny", body(tensor(), tensor()), None, 400, "more than once"),
    "missing input": ("tiny", body(), None, 400, "missing input 'INPUT0'"),
    "input the model does not have": (
        "tiny",
        body(tensor(), tensor(name="EXTRA")),
        None,
        400,
        "has no input 'EXTRA'",
    ),
    "batch over max_batch_size": (
        "batched",
        body(tensor(shape=[5, 16], data=[0.0] * 80)),
        None,
        400,
        "max_batch_size",
    ),
    "wrong output": (
        "tiny",
        body(tensor(), outputs=[{"name": "NOPE"}]),
        None,
        400,
        "no output 'NOPE'",
    ),
    "outputs not a list": ("tiny", body(tensor(), outputs="OUTPUT0"), None, 400, "'outputs'"),
    "priority not an integer": (
        "tiny",
        body(tensor(), parameters={"priority": "high"}),
        None,
        400,
        "priority",
    ),
    "negative timeout": ("tiny", body(tensor(), parameters={"timeout": -5}), None, 400, "timeout"),
    "id not a string": ("tiny", body(tensor(), id=7), None, 400, "'id'"),
}


def post(
    server: RunningServer, path: str, data: bytes, header_length: int | None
) -> tuple[int, bytes]:
    extra = (
        b"" if header_length is None else b"Inference-Header-Content-Length: %d\r\n" % header_length
    )
    request = (
        b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n" % len(data) + extra + b"\r\n" + data
    )
    answer = raw_exchange(server.http_port, request)
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), payload


def good_http(server: RunningServer) -> None:
    status, payload = post(server, "/v2/models/tiny/infer", body(tensor()), None)
    assert status == 200, payload
    assert json.loads(payload)["outputs"][0]["data"] == [1.5] * 16


@pytest.mark.parametrize("case", list(HTTP_CASES))
def test_hostile_http_request(server: RunningServer, case: str) -> None:
    model, data, header_length, expected, words = HTTP_CASES[case]
    status, payload = post(server, f"/v2/models/{model}/infer", data, header_length)
    assert status == expected, (status, payload[:300])
    assert words in json.loads(payload)["error"], payload[:300]
    good_http(server)


def test_hostile_http_urls_and_limits(server: RunningServer) -> None:
    for path, expected in [
        ("/v2/models/" + "m" * 10_000 + "/infer", (400, 404)),
        ("/v2/models/%FF%FE/infer", (400, 404)),
        ("/v2/models/tiny/versions/abc/infer", (400, 404)),
        ("/v2/models/tiny/versions/99999999999999999999999/infer", (400, 404)),
    ]:
        status, payload = post(server, path, body(tensor()), None)
        assert status in expected, (path[:60], status, payload[:200])
        assert json.loads(payload)["error"]
    # Over the body limit: refused from the headers alone, before any of the body is sent.
    head = b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (
        LIMIT + 1
    )
    answer = raw_exchange(server.http_port, head)
    assert answer.startswith(b"HTTP/1.1 400") and b"--max-body-bytes" in answer, answer[:300]
    good_http(server)
    # Chunked, no length given: refused as soon as the limit is passed.
    chunk = b"x" * 65536
    data = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMIT // 65536 + 2))
    answer = raw_exchange(
        server.http_port,
        b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + data + b"0\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 400") and b"limit" in answer, answer[:300]
    good_http(server)


# -- gRPC --------------------------------------------------------------------------------


def grpc_tensor(
    name: str = "INPUT0", datatype: str = "FP32", shape=(1, 16)
) -> pb.ModelInferRequest.InferInputTensor:  # type: ignore[no-untyped-def]
    return pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype, shape=list(shape))


def request(model: str = "tiny", inputs=None, raw=None, **fields) -> bytes:  # type: ignore[no-untyped-def]
    message = pb.ModelInferRequest(model_name=model, **fields)
    message.inputs.extend([grpc_tensor()] if inputs is None else inputs)
    message.raw_input_contents.extend([FLOATS] if raw is None else raw)
    return message.SerializeToString()


def typed(**contents) -> pb.ModelInferRequest.InferInputTensor:  # type: ignore[no-untyped-def]
    t = grpc_tensor()
    t.contents.CopyFrom(pb.InferTensorContents(**contents))
    return t


# (serialized request, expected code, words the message must say)
GRPC_CASES = {
    "garbage bytes": (
        b"\xff\xff\xff\xff\x0f\x01",
        "INVALID_ARGUMENT",
        "could not parse the ModelInferRequest",
    ),
    "truncated message": (
        request()[:-10],
        "INVALID_ARGUMENT",
        "runs past the end of the message",
    ),
    "empty model name": (request(model=""), "INVALID_ARGUMENT", "model_name"),
    "unknown model": (request(model="nope"), "NOT_FOUND", "nope"),
    "very long model name": (request(model="m" * 100_000), "NOT_FOUND", "not in the repository"),
    "non-UTF-8 name": (
        request().replace(b"INPUT0", b"INPU\xff\xfe"),
        "INVALID_ARGUMENT",
        "field 'inputs[0].name' is not valid UTF-8",
    ),
    "unknown datatype": (
        request(inputs=[grpc_tensor(datatype="FP128")]),
        "INVALID_ARGUMENT",
        "FP128",
    ),
    "huge shape": (
        request(inputs=[grpc_tensor(shape=(2**62, 2**62))]),
        "INVALID_ARGUMENT",
        "shape",
    ),
    "shape x datatype over 64 bits": (
        request(inputs=[grpc_tensor(datatype="FP64", shape=(2**58, 64))]),
        "INVALID_ARGUMENT",
        "shape",
    ),
    "negative shape": (
        request(inputs=[grpc_tensor(shape=(-1, 16))]),
        "INVALID_ARGUMENT",
        "negative",
    ),
    "raw overrun": (request(raw=[FLOATS + b"1234"]), "INVALID_ARGUMENT", "needs 64"),
    "raw underrun": (request(raw=[FLOATS[:60]]), "INVALID_ARGUMENT", "needs 64"),
    "raw count mismatch": (request(raw=[FLOATS, FLOATS]), "INVALID_ARGUMENT", "raw_input_contents"),
    "BYTES prefix past the end": (
        request(
            model="words",
            inputs=[grpc_tensor(datatype="BYTES", shape=(1,))],
            raw=[struct.pack("<I", 2**31) + b"ab"],
        ),
        "INVALID_ARGUMENT",
        "length prefix",
    ),
    "typed contents of the wrong kind": (
        request(inputs=[typed(int_contents=[1] * 16)], raw=[]),
        "INVALID_ARGUMENT",
        "fp32_contents",
    ),
    "typed count mismatch": (
        request(inputs=[typed(fp32_contents=[1.0] * 3)], raw=[]),
        "INVALID_ARGUMENT",
        "needs 16 elements",
    ),
    "duplicate inputs": (
        request(inputs=[grpc_tensor(), grpc_tensor()], raw=[FLOATS, FLOATS]),
        "INVALID_ARGUMENT",
        "more than once",
    ),
    "missing input": (request(inputs=[], raw=[]), "INVALID_ARGUMENT", "missing input"),
    "input the model does not have": (
        request(inputs=[grpc_tensor(), grpc_tensor(name="EXTRA")], raw=[FLOATS, FLOATS]),
        "INVALID_ARGUMENT",
        "EXTRA",
    ),
    "batch over max_batch_size": (
        request(model="batched", inputs=[grpc_tensor(shape=(5, 16))], raw=[FLOATS * 5]),
        "INVALID_ARGUMENT",
        "max_batch_size",
    ),
    "message over the limit": (request(raw=[b"\0" * (LIMIT + 64)]), "RESOURCE_EXHAUSTED", ""),
}


def call(server: RunningServer, data: bytes) -> bytes:
    with grpc.insecure_channel(server.grpc_url.removeprefix("grpc://")) as channel:
        method = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        return method(data, timeout=10)


@pytest.mark.parametrize("case", list(GRPC_CASES))
def test_hostile_grpc_request(server: RunningServer, case: str) -> None:
    data, code, words = GRPC_CASES[case]
    with pytest.raises(grpc.RpcError) as error:
        call(server, data)
    assert error.value.code().name == code, (error.value.code(), error.value.details())
    assert words in (error.value.details() or ""), error.value.details()
    answer = pb.ModelInferResponse.FromString(call(server, request()))
    assert np.frombuffer(answer.raw_output_contents[0], np.float32).tolist() == [1.0] * 16
