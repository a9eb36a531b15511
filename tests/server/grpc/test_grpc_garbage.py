"""Bytes that are not a protobuf message, sent to every method of the service over a raw
channel: each registered method answers INVALID_ARGUMENT naming its request type (never
grpcio's UNKNOWN), ModelStreamInfer answers in-band and keeps the stream open, and the same
method then serves a good request."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest
from google.protobuf.message import DecodeError

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc.methods import METHODS
from conveyor.server.dataplane import DataPlane
from conveyor.server.grpc.servicer import InferenceServicer

TIMEOUT = 10  # seconds, every call

# Not a valid message of any request type: a truncated varint as the first key; field 1
# as a varint cut short; field 1 claiming 5 bytes where 2 follow; a key with wire type 7.
GARBAGE = {
    "truncated key": b"\xff\xff\xff",
    "truncated varint": b"\x08\x80",
    "length past the end": b"\x0a\x05ab",
    "bad wire type": b"\x0f",
}

FLOATS = np.arange(16, dtype=np.float32)


def infer_request() -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name="tiny")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    request.raw_input_contents.append(FLOATS.tobytes())
    return request


# A well-formed request per unary method, and the status it must get (OK: answered).
GOOD: dict[str, tuple[Any, str]] = {
    "ServerLive": (pb.ServerLiveRequest(), "OK"),
    "ServerReady": (pb.ServerReadyRequest(), "OK"),
    "ModelReady": (pb.ModelReadyRequest(name="tiny"), "OK"),
    "ServerMetadata": (pb.ServerMetadataRequest(), "OK"),
    "ModelMetadata": (pb.ModelMetadataRequest(name="tiny"), "OK"),
    "ModelConfig": (pb.ModelConfigRequest(name="tiny"), "OK"),
    "ModelStatistics": (pb.ModelStatisticsRequest(name="tiny"), "OK"),
    "ModelInfer": (infer_request(), "OK"),
    "RepositoryIndex": (pb.RepositoryIndexRequest(), "OK"),
    # Parsed and answered on its merits: the model does not exist (nothing is changed).
    "RepositoryModelLoad": (pb.RepositoryModelLoadRequest(model_name="no-such"), "NOT_FOUND"),
    "RepositoryModelUnload": (pb.RepositoryModelUnloadRequest(model_name="no-such"), "NOT_FOUND"),
    # System shared memory is on (the server listens on loopback); an empty key is refused.
    "SystemSharedMemoryStatus": (pb.SystemSharedMemoryStatusRequest(), "OK"),
    "SystemSharedMemoryUnregister": (pb.SystemSharedMemoryUnregisterRequest(), "OK"),
    "SystemSharedMemoryRegister": (pb.SystemSharedMemoryRegisterRequest(), "INVALID_ARGUMENT"),
    # CUDA's: no region is ever registered (no GPU), as Triton built without GPUs answers;
    # registering one is refused with a message.
    "CudaSharedMemoryStatus": (pb.CudaSharedMemoryStatusRequest(), "OK"),
    "CudaSharedMemoryUnregister": (pb.CudaSharedMemoryUnregisterRequest(), "OK"),
    "CudaSharedMemoryRegister": (pb.CudaSharedMemoryRegisterRequest(), "UNIMPLEMENTED"),
    # Trace and logging extensions: an empty request reads the settings.
    "TraceSetting": (pb.TraceSettingRequest(), "OK"),
    "LogSettings": (pb.LogSettingsRequest(), "OK"),
}

REGISTERED = set(InferenceServicer(DataPlane(version="test")).implementations())
UNARY = [name for name, m in METHODS.items() if not (m.client_streaming or m.server_streaming)]


def test_every_unary_method_has_a_good_request() -> None:
    assert sorted(GOOD) == sorted(UNARY)


def status(call: Any) -> tuple[str, str, bytes | None]:
    """(code name, details, response bytes) of a call that may fail."""
    try:
        return "OK", "", call()
    except grpc.RpcError as exc:
        return exc.code().name, exc.details() or "", None


@pytest.mark.parametrize("garbage", list(GARBAGE))
@pytest.mark.parametrize("name", UNARY)
def test_garbage_to_unary_method(grpc_address: str, name: str, garbage: str) -> None:
    method = METHODS[name]
    with pytest.raises(DecodeError):  # the bytes really are not a message of this type
        method.request.FromString(GARBAGE[garbage])
    with grpc.insecure_channel(grpc_address) as channel:
        raw = channel.unary_unary(method.path)  # no (de)serializers: bytes in, bytes out
        code, details, _ = status(lambda: raw(GARBAGE[garbage], timeout=TIMEOUT))
        if name in REGISTERED:
            assert code == "INVALID_ARGUMENT", (code, details)
            assert f"could not parse the {method.request.DESCRIPTOR.name}: " in details, details
        else:
            assert code == "UNIMPLEMENTED", (code, details)

        # The same method, on the same channel, still answers a good request.
        good, expected = GOOD[name]
        code, details, answer = status(lambda: raw(good.SerializeToString(), timeout=TIMEOUT))
        assert code == expected, (code, details)
        if name == "ModelInfer":
            assert answer is not None
            output = pb.ModelInferResponse.FromString(answer).raw_output_contents[0]
            assert np.frombuffer(output, np.float32).tolist() == (FLOATS + 1).tolist()


def test_garbage_on_the_stream(grpc_address: str) -> None:
    """ModelStreamInfer answers each unparseable message in-band; the stream goes on."""
    method = METHODS["ModelStreamInfer"]
    sent = [*GARBAGE.values(), infer_request().SerializeToString()]
    with grpc.insecure_channel(grpc_address) as channel:
        stream = channel.stream_stream(method.path)
        answers = [
            pb.ModelStreamInferResponse.FromString(answer)
            for answer in stream(iter(sent), timeout=TIMEOUT)
        ]
    assert len(answers) == len(sent)
    failed = [a for a in answers if a.error_message]
    assert len(failed) == len(GARBAGE), answers
    for answer in failed:
        assert "could not parse the ModelInferRequest: " in answer.error_message
        code = answer.infer_response.parameters["error_code"].string_param
        assert code == "INVALID_ARGUMENT"
    (good,) = [a for a in answers if not a.error_message]
    output = good.infer_response.raw_output_contents[0]
    assert np.frombuffer(output, np.float32).tolist() == (FLOATS + 1).tolist()
