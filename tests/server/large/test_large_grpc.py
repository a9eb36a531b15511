"""Large tensors over gRPC (raw contents both ways), and BYTES elements onnxruntime refuses."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conveyor.protocol.grpc import converters
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.testing import RunningServer
from tests.server.large.large_models import MiB


@pytest.fixture
def client(large_server: RunningServer):
    client = grpcclient.InferenceServerClient(large_server.grpc_url.removeprefix("grpc://"))
    yield client
    client.close()


def _input(data: np.ndarray, datatype: str) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput("INPUT0", list(data.shape), datatype)
    tensor.set_data_from_numpy(data)
    return tensor


def test_8_mib_fp32_round_trip(client: grpcclient.InferenceServerClient) -> None:
    data = np.random.default_rng(2).standard_normal(2 * MiB).astype(np.float32)
    result = client.infer("identity", [_input(data, "FP32")])
    assert result.as_numpy("OUTPUT0").tobytes() == data.tobytes()


def test_large_bytes_tensor_round_trip(client: grpcclient.InferenceServerClient) -> None:
    rng = np.random.default_rng(3)
    elements = [rng.bytes(int(n)) for n in rng.integers(0, 2048, 3000)]
    result = client.infer("echo_bytes", [_input(np.array(elements, dtype=object), "BYTES")])
    assert list(result.as_numpy("OUTPUT0")) == elements


def test_large_tensors_on_a_stream(client: grpcclient.InferenceServerClient) -> None:
    answers: list = []
    client.start_stream(callback=lambda result, error: answers.append((result, error)))
    sent = [np.full(MiB, i, dtype=np.float32) for i in range(3)]  # 4 MiB each
    for i, data in enumerate(sent):
        client.async_stream_infer("identity", [_input(data, "FP32")], request_id=str(i))
    client.stop_stream()
    assert [error for _, error in answers] == [None, None, None]
    by_id = {result.get_response().id: result.as_numpy("OUTPUT0") for result, _ in answers}
    for i, data in enumerate(sent):
        assert by_id[str(i)].tobytes() == data.tobytes()


def test_non_utf8_element_for_an_onnx_string_input_is_invalid_argument(
    client: grpcclient.InferenceServerClient,
) -> None:
    data = np.array([b"ok", b"ok", b"caf\xe9"], dtype=object)
    with pytest.raises(InferenceServerException) as caught:
        client.infer("strings", [_input(data, "BYTES")])
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "'INPUT0'" in caught.value.message()
    assert "element 2" in caught.value.message()


def test_stream_response_bytes_parse_as_the_protobuf_message() -> None:
    outputs = {
        "A": np.arange(MiB // 4, dtype=np.float32),  # 1 MiB: a length that takes 3 varint bytes
        "B": np.array([b"x", b"\xff" * 300], dtype=object),
    }
    wire = b"".join(converters.infer_response_parts("m", "1", "id", outputs, stream=True))
    expected = pb.ModelStreamInferResponse(
        infer_response=pb.ModelInferResponse.FromString(
            b"".join(converters.infer_response_parts("m", "1", "id", outputs))
        )
    )
    # Every stream response says whether it is the request's last, as Triton's does.
    expected.infer_response.parameters["triton_final_response"].bool_param = True
    assert pb.ModelStreamInferResponse.FromString(wire) == expected
