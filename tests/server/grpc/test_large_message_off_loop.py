"""A large gRPC infer message is read off the event loop: while one costs the server a
long read (hundreds of thousands of inputs), other clients' small calls keep being
answered."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.testing import RunningServer, run_server

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"


@pytest.fixture(scope="module", params=["conveyor", "grpcio"])
def server(request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    with run_server(extra_args=["--grpc-transport", request.param]) as running:
        yield running


def slow_to_read(count: int) -> bytes:
    """A ModelInferRequest for ``tiny`` with ``count`` one-element inputs (a few MiB):
    each becomes an array before the model refuses the names it does not have."""
    request = pb.ModelInferRequest(model_name="tiny")
    for index in range(count):
        request.inputs.add(name=f"x{index}", datatype="FP32", shape=[1])
        request.raw_input_contents.append(bytes(4))
    return request.SerializeToString()


def test_small_calls_are_answered_while_a_large_message_is_scanned(
    server: RunningServer,
) -> None:
    target = server.grpc_url.removeprefix("grpc://")
    small = grpcclient.InferenceServerClient(target)
    tensor = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 16), np.float32))
    small.infer("tiny", [tensor])  # warm
    answered: list[float] = []
    stop = threading.Event()

    def keep_asking() -> None:
        while not stop.is_set():
            small.infer("tiny", [tensor], client_timeout=60)
            answered.append(time.monotonic())

    asker = threading.Thread(target=keep_asking, daemon=True)
    asker.start()
    options = [("grpc.max_send_message_length", 64 << 20)]
    with grpc.insecure_channel(target, options=options) as channel:
        call = channel.unary_unary(
            MODEL_INFER,
            request_serializer=lambda data: data,
            response_deserializer=pb.ModelInferResponse.FromString,
        )
        message = slow_to_read(300_000)
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            call(message, timeout=120)
        ended = time.monotonic()
    stop.set()
    asker.join(60)
    small.close()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "x0" in (refused.value.details() or "")
    # The small calls answered while the large one was in the server: none waited behind
    # its read (on the loop, the longest gap between two answers was most of it).
    during = [started, *(t for t in answered if started < t < ended), ended]
    longest_gap = max(b - a for a, b in itertools.pairwise(during))
    assert len(during) > 10
    assert longest_gap < 0.5 * (ended - started), (longest_gap, ended - started)
