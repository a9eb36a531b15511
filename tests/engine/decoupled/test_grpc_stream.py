"""Decoupled models over gRPC ModelStreamInfer, driven with tritonclient's stream API."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer, run_server
from tests.engine.decoupled.models import build
from tests.polling import wait_until


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("grpc_streaming"))


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    with run_server(repository) as running:
        yield running


def repeat_inputs(count: int, delay_ms: int) -> list[grpcclient.InferInput]:
    inputs = []
    for name, value in (("COUNT", count), ("DELAY_MS", delay_ms)):
        tensor = grpcclient.InferInput(name, [1], "INT32")
        tensor.set_data_from_numpy(np.array([value], np.int32))
        inputs.append(tensor)
    return inputs


def collect(
    server: RunningServer, model: str, inputs: list[Any], *, final: bool, request_id: str = "r1"
) -> list[tuple[float, Any]]:
    """Every callback of one streamed request, time-stamped, up to the end of the request."""
    arrivals: queue.SimpleQueue[tuple[float, Any]] = queue.SimpleQueue()
    client = grpcclient.InferenceServerClient(grpc_address(server))
    client.start_stream(
        callback=lambda result, error: arrivals.put((time.monotonic(), (result, error)))
    )
    try:
        client.async_stream_infer(
            model, inputs, request_id=request_id, enable_empty_final_response=final
        )
        got = []
        while True:
            stamp, (result, error) = arrivals.get(timeout=20)
            assert error is None, error
            got.append((stamp, result))
            response = result.get_response()
            if not final or response.parameters["triton_final_response"].bool_param:
                if not final and len(got) < expected_count(inputs):
                    continue
                return got
    finally:
        client.stop_stream()
        client.close()


def expected_count(inputs: list[Any]) -> int:
    return 4 if inputs[0].name() == "COUNT" else 3


def test_each_response_is_sent_as_it_is_produced(server: RunningServer):
    got = collect(server, "repeat", repeat_inputs(4, 200), final=False)
    values = [int(result.as_numpy("OUT")[0]) for _, result in got]
    assert values == [0, 1, 2, 3]
    assert all(result.get_response().id == "r1" for _, result in got)
    # Time-stamped: the first arrived while the model still had 3 x 200 ms to go.
    assert got[-1][0] - got[0][0] >= 0.45


def test_the_final_flag_when_the_client_asks(server: RunningServer):
    got = collect(server, "repeat", repeat_inputs(4, 10), final=True)
    flags = [r.get_response().parameters["triton_final_response"].bool_param for _, r in got]
    assert flags == [False, False, False, False, True]
    assert got[-1][1].get_response().outputs == []
    assert got[-1][1].get_response().id == "r1"


def test_a_triton_response_sender_over_grpc(server: RunningServer):
    values = grpcclient.InferInput("IN", [3], "INT32")
    values.set_data_from_numpy(np.array([7, 8, 9], np.int32))
    delays = grpcclient.InferInput("DELAY", [3], "UINT32")
    delays.set_data_from_numpy(np.array([0, 250, 250], np.uint32))
    got = collect(server, "triton_repeat", [values, delays], final=True)
    outputs = [int(r.as_numpy("OUT")[0]) for _, r in got[:-1]]
    assert outputs == [7, 8, 9]
    assert got[-2][0] - got[0][0] >= 0.4


def test_unary_infer_to_a_decoupled_model_is_refused(server: RunningServer):
    words = "ModelInfer RPC doesn't support models with decoupled transaction policy"
    refused = pytest.raises(InferenceServerException, match=words)
    with grpcclient.InferenceServerClient(grpc_address(server)) as client, refused:
        client.infer("repeat", repeat_inputs(2, 0), client_timeout=10)
    with httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}") as client:
        inputs = []
        for name in ("COUNT", "DELAY_MS"):
            tensor = httpclient.InferInput(name, [1], "INT32")
            tensor.set_data_from_numpy(np.array([1], np.int32))
            inputs.append(tensor)
        words = "HTTP end point doesn't support models with decoupled transaction policy"
        with pytest.raises(InferenceServerException, match=words):
            client.infer("repeat", inputs)


def test_a_client_that_goes_away_stops_the_model(server: RunningServer, repository: Path):
    progress = repository / "repeat" / "1" / "progress"
    progress.write_text("")
    arrivals: queue.SimpleQueue[Any] = queue.SimpleQueue()
    client = grpcclient.InferenceServerClient(grpc_address(server))
    client.start_stream(callback=lambda result, error: arrivals.put(result))
    client.async_stream_infer("repeat", repeat_inputs(100_000, 5))
    arrivals.get(timeout=20)
    client.stop_stream(cancel_requests=True)
    client.close()
    wait_until(lambda: progress.read_text().startswith("closed at"), timeout=20)


def grpc_address(server: RunningServer) -> str:
    return f"127.0.0.1:{server.grpc_port}"
