"""The generator's own V2 encoding, checked against tritonclient's generated protobuf classes."""

import numpy as np
import orjson
import pytest

from conveyor.bench.targets import pbwire
from conveyor.bench.targets.base import TargetSpec
from conveyor.bench.targets.grpc import build_request as grpc_request
from conveyor.bench.targets.http import build_request as http_request
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
DECLARED = {"INPUT0": "FP32", "NAMES": "BYTES"}


def test_grpc_infer_request_parses_as_the_v2_message(service_pb2):
    data = grpc_request(TargetSpec("grpc://h:1", "m", version="3"), INPUTS, DECLARED)
    msg = service_pb2.ModelInferRequest.FromString(data)
    assert (msg.model_name, msg.model_version) == ("m", "3")
    assert [(t.name, t.datatype, list(t.shape)) for t in msg.inputs] == [
        ("INPUT0", "FP32", [2, 3]), ("NAMES", "BYTES", [3])]
    assert msg.raw_input_contents[0] == INPUTS["INPUT0"].tobytes()
    assert msg.raw_input_contents[1] == b"\x02\0\0\0ab\0\0\0\0\x01\0\0\0\xff"


def test_negative_dimensions_round_trip(service_pb2):
    data = pbwire.field_packed_int64(3, [-1, 16])
    tensor = service_pb2.ModelMetadataResponse.TensorMetadata.FromString(data)
    assert list(tensor.shape) == [-1, 16]


def test_grpc_responses_are_read_like_the_http_json(service_pb2):
    meta = service_pb2.ModelMetadataResponse(
        name="mlp", versions=["1"], platform="onnxruntime_onnx",
        inputs=[service_pb2.ModelMetadataResponse.TensorMetadata(
            name="INPUT0", datatype="FP32", shape=[-1, 256])],
        outputs=[service_pb2.ModelMetadataResponse.TensorMetadata(
            name="OUTPUT0", datatype="FP32", shape=[-1, 16])],
    )
    assert pbwire.metadata_response(meta.SerializeToString()) == {
        "name": "mlp", "versions": ["1"], "platform": "onnxruntime_onnx",
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 256]}],
        "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 16]}],
    }
    duration = service_pb2.StatisticDuration
    stats = service_pb2.ModelStatisticsResponse(model_stats=[service_pb2.ModelStatistics(
        name="mlp", version="1", inference_count=40, execution_count=5,
        inference_stats=service_pb2.InferStatistics(
            success=duration(count=10, ns=1000), queue=duration(count=10, ns=300),
            compute_infer=duration(count=10, ns=500)),
    )])
    body = pbwire.statistics_response(stats.SerializeToString())
    (model,) = body["model_stats"]
    assert (model["name"], model["version"], model["inference_count"],
            model["execution_count"]) == ("mlp", "1", 40, 5)
    assert model["inference_stats"]["queue"] == {"count": 10, "ns": 300}
    assert model["inference_stats"]["compute_infer"] == {"count": 10, "ns": 500}


def test_http_binary_request_follows_the_binary_extension():
    data = http_request(TargetSpec("http://h:1", "m"), INPUTS, DECLARED)
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
    assert body[header_length:header_length + 24] == INPUTS["INPUT0"].tobytes()


def test_http_json_request_is_plain_v2():
    data = http_request(TargetSpec("http://h:1", "m", version="2", encoding="json"),
                        INPUTS, DECLARED)
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /v2/models/m/versions/2/infer HTTP/1.1")
    assert b"Content-Type: application/json" in head
    tensors = orjson.loads(body)["inputs"]
    assert tensors[0] == {"name": "INPUT0", "shape": [2, 3], "datatype": "FP32",
                          "data": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]}
    assert tensors[1]["data"][:2] == ["ab", ""]


def test_stream_answers_give_the_request_id_and_error(service_pb2):
    from conveyor.bench.targets.grpc_stream import answer_of

    ok = service_pb2.ModelStreamInferResponse(
        infer_response=service_pb2.ModelInferResponse(model_name="m", id="7"))
    assert answer_of(ok.SerializeToString()) == ("7", "")
    failed = service_pb2.ModelStreamInferResponse(
        error_message="no such input", infer_response=service_pb2.ModelInferResponse(id="8"))
    assert answer_of(failed.SerializeToString()) == ("8", "no such input")
