"""Compressed request messages on Conveyor's gRPC transport: gzip and deflate, as grpcio's
server and Triton's take them, with the size limit applied to the inflated message."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.testing import RunningServer
from tests.server.grpc.h2.raw_client import RawClient, frame
from tests.server.grpc.h2.requests import MAX_MESSAGE_BYTES, tiny_request

OK, RESOURCE_EXHAUSTED, INTERNAL, UNIMPLEMENTED = 0, 8, 13, 12
DATA, END_STREAM = 0x0, 0x1


def compressed_message(payload: bytes) -> bytes:
    """``payload`` framed as a gRPC message flagged compressed."""
    return b"\x01" + len(payload).to_bytes(4, "big") + payload


def send_compressed(client: RawClient, encoding: str, payload: bytes) -> tuple[int, str]:
    stream_id = client.headers("ModelInfer", extra=[("grpc-encoding", encoding)])
    message = compressed_message(payload)
    for start in range(0, len(message), 16_384):
        last = start + 16_384 >= len(message)
        piece = message[start : start + 16_384]
        client.send(frame(DATA, END_STREAM if last else 0, stream_id, piece))
    answer = client.until_closed(stream_id)
    return answer.status(), answer.message()


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_tritonclient_compressed_requests_are_answered(
    server: RunningServer, algorithm: str
) -> None:
    with grpcclient.InferenceServerClient(server.grpc_url.split("://", 1)[1]) as client:
        data = np.arange(32, dtype=np.float32).reshape(2, 16)
        given = grpcclient.InferInput("INPUT0", [2, 16], "FP32")
        given.set_data_from_numpy(data)
        result = client.infer("tiny", [given], compression_algorithm=algorithm)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data + 1)
        # Large and incompressible: the compressed message is read straight into its buffer.
        noise = np.random.default_rng(7).random(1024 * 1024, dtype=np.float32)
        given = grpcclient.InferInput("INPUT0", [noise.size], "FP32")
        given.set_data_from_numpy(noise)
        result = client.infer("identity", [given], compression_algorithm=algorithm)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), noise)


def test_the_limit_applies_to_the_inflated_message(server: RunningServer) -> None:
    # A few kilobytes that would inflate past the limit: refused, without inflating it all.
    request = pb.ModelInferRequest(model_name="tiny")
    request.raw_input_contents.append(bytes(MAX_MESSAGE_BYTES))
    bomb = gzip.compress(request.SerializeToString())
    assert len(bomb) < 64 * 1024
    with RawClient(server.grpc_port) as client:
        status, message = send_compressed(client, "gzip", bomb)
        assert status == RESOURCE_EXHAUSTED
        assert f"more than {MAX_MESSAGE_BYTES} bytes once decompressed" in message
        assert client.call("ModelInfer", tiny_request()).status() == OK


def test_a_message_that_does_not_inflate_fails_its_call_only(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        status, message = send_compressed(client, "gzip", b"not gzip at all")
        assert status == INTERNAL
        assert "could not be decompressed with its grpc-encoding" in message
        # zlib's format announced, gzip's sent: refused too.
        status, _ = send_compressed(client, "deflate", gzip.compress(tiny_request()))
        assert status == INTERNAL
        status, _ = send_compressed(client, "deflate", zlib.compress(tiny_request()))
        assert status == OK
        # Cut short: no end marker.
        status, message = send_compressed(client, "gzip", gzip.compress(tiny_request())[:-12])
        assert status == INTERNAL and "ends before its end marker" in message


def test_an_unknown_encoding_is_unimplemented(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        answer = client.call("ModelInfer", tiny_request(), extra=[("grpc-encoding", "snappy")])
        assert answer.status() == UNIMPLEMENTED
        assert "'snappy' is not supported: send identity, gzip or deflate" in answer.message()


def test_a_compressed_flag_without_an_encoding_is_refused(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        stream_id = client.headers("ModelInfer")
        client.send(frame(DATA, END_STREAM, stream_id, compressed_message(b"x")))
        answer = client.until_closed(stream_id)
        assert answer.status() == INTERNAL
        assert "without grpc-encoding" in answer.message()


def test_a_compressed_call_with_a_bad_input_gets_the_usual_error(server: RunningServer) -> None:
    with grpcclient.InferenceServerClient(server.grpc_url.split("://", 1)[1]) as client:
        given = grpcclient.InferInput("INPUT0", [1, 15], "FP32")
        given.set_data_from_numpy(np.zeros((1, 15), np.float32))
        with pytest.raises(InferenceServerException) as raised:
            client.infer("tiny", [given], compression_algorithm="gzip")
        assert "INPUT0" in raised.value.message() and "[1, 15]" in raised.value.message()
