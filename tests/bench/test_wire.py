"""The generator's prebuilt requests (made by conveyor.protocol), checked against tritonclient's
generated protobuf classes and the binary extension; its control side against a real server."""

import numpy as np
import orjson
import pytest

from conveyor.bench.inputs import InputSpec
from conveyor.bench.targets.base import TargetSpec
from conveyor.bench.targets.grpc import build_request as grpc_request
from conveyor.bench.targets.grpc_stream import with_id
from conveyor.bench.targets.http import build_request as http_request
from conveyor.bench.targets.pick import make_control
from conveyor.protocol.grpc._generated import grpc_service_pb2 as conveyor_pb2

triton_pb2 = pytest.importorskip("tritonclient.grpc.service_pb2")


@pytest.fixture(params=["tritonclient", "conveyor"])
def service_pb2(request):
    """The V2 messages as tritonclient and as Conveyor's own server generate them."""
    return triton_pb2 if request.param == "tritonclient" else conveyor_pb2


INPUTS = {
    "INPUT0": np.arange(6, dtype=np.float32).reshape(2, 3),
    "NAMES": np.array([b"ab", b"", b"\xff"], dtype=object),
}


def test_grpc_infer_request_parses_as_the_v2_message(service_pb2):
    data = grpc_request(TargetSpec("grpc://h:1", "m", version="3"), INPUTS)
    msg = service_pb2.ModelInferRequest.FromString(data)
    assert (msg.model_name, msg.model_version) == ("m", "3")
    assert [(t.name, t.datatype, list(t.shape)) for t in msg.inputs] == [
        ("INPUT0", "FP32", [2, 3]),
        ("NAMES", "BYTES", [3]),
    ]
    assert msg.raw_input_contents[0] == INPUTS["INPUT0"].tobytes()
    assert msg.raw_input_contents[1] == b"\x02\0\0\0ab\0\0\0\0\x01\0\0\0\xff"


def test_a_stream_request_carries_its_id_and_keeps_its_tensors(service_pb2):
    data = with_id(grpc_request(TargetSpec("grpc://h:1", "m"), INPUTS), "41")
    msg = service_pb2.ModelInferRequest.FromString(data)
    assert (msg.model_name, msg.id) == ("m", "41")
    assert msg.raw_input_contents[0] == INPUTS["INPUT0"].tobytes()


@pytest.fixture(scope="module")
def server():
    from conveyor.testing import run_server

    with run_server() as running:
        yield running


def test_grpc_control_reads_what_http_control_reads(server):
    # The negative batch dimension and the statistics come through either transport alike.
    described = {}
    for url in (server.http_url, server.grpc_url):
        control = make_control(TargetSpec(url, "mlp"))
        try:
            described[url] = (control.describe(), control.statistics())
        finally:
            control.close()
    (http_model, http_stats), (grpc_model, grpc_stats) = described.values()
    assert grpc_model == http_model
    assert grpc_model.inputs[0] == InputSpec("INPUT0", "FP32", (-1, 256))
    assert grpc_model.max_batch_size is not None and grpc_model.max_batch_size > 0
    assert grpc_stats is not None and grpc_stats == http_stats


def test_http_binary_request_follows_the_binary_extension():
    data = http_request(TargetSpec("http://h:1", "m"), INPUTS)
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v2/models/m/infer HTTP/1.1"
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert int(headers["Content-Length"]) == len(body)
    header_length = int(headers["Inference-Header-Content-Length"])
    header = orjson.loads(body[:header_length])
    assert header["parameters"] == {"binary_data_output": True}
    sizes = [t["parameters"]["binary_data_size"] for t in header["inputs"]]
    assert sizes == [24, 15] and header_length + sum(sizes) == len(body)
    assert body[header_length : header_length + 24] == INPUTS["INPUT0"].tobytes()


def test_http_json_request_is_plain_v2():
    # JSON carries BYTES as UTF-8 strings, so the third element is text here (b"\xff" cannot).
    text_inputs = {**INPUTS, "NAMES": np.array([b"ab", b"", "\u00e9".encode()], dtype=object)}
    data = http_request(TargetSpec("http://h:1", "m", version="2", encoding="json"), text_inputs)
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /v2/models/m/versions/2/infer HTTP/1.1")
    assert b"Content-Type: application/json" in head
    tensors = orjson.loads(body)["inputs"]
    assert tensors[0] == {
        "name": "INPUT0",
        "shape": [2, 3],
        "datatype": "FP32",
        "data": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
    }
    assert tensors[1]["data"][:2] == ["ab", ""]


def test_stream_answers_give_the_request_id_and_error(service_pb2):
    from conveyor.bench.targets.grpc_stream import answer_of

    ok = service_pb2.ModelStreamInferResponse(
        infer_response=service_pb2.ModelInferResponse(model_name="m", id="7")
    )
    assert answer_of(ok.SerializeToString()) == ("7", "")
    failed = service_pb2.ModelStreamInferResponse(
        error_message="no such input", infer_response=service_pb2.ModelInferResponse(id="8")
    )
    assert answer_of(failed.SerializeToString()) == ("8", "no such input")
