"""The serialised gRPC requests these tests send, and the message limit the server gets."""

from __future__ import annotations

import numpy as np

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb

MAX_MESSAGE_BYTES = 8 * 1024 * 1024


def tiny_request(request_id: str = "") -> bytes:
    request = pb.ModelInferRequest(model_name="tiny", id=request_id)
    tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    del tensor
    request.raw_input_contents.append(np.arange(16, dtype=np.float32).tobytes())
    return request.SerializeToString()


def identity_request(payload: bytes) -> bytes:
    request = pb.ModelInferRequest(model_name="identity")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[len(payload) // 4])
    request.raw_input_contents.append(payload)
    return request.SerializeToString()


def runs_request(tag: bytes, seconds: float) -> bytes:
    request = pb.ModelInferRequest(model_name="runs", id=tag.decode())
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[1])
    request.inputs.add(name="TAG", datatype="BYTES", shape=[1])
    request.raw_input_contents.append(np.float32(seconds).tobytes())
    request.raw_input_contents.append(len(tag).to_bytes(4, "little") + tag)
    return request.SerializeToString()


def tiny_output(answer_bytes: bytes) -> np.ndarray:
    response = pb.ModelInferResponse.FromString(answer_bytes)
    return np.frombuffer(response.raw_output_contents[0], np.float32)
