"""pb_utils on a real server: a stateful decoupled model reads Triton's request flags, and
BLS calls a model named by a bytes value and streams a decoupled model's responses.

Models: tests/triton/bls_models.py (config.pbtxt, as Triton repositories have them).
"""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from tests.triton.bls_models import build


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(build(tmp_path_factory.mktemp("pb-utils-bls"))) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@contextlib.contextmanager
def _stream(
    server: RunningServer,
) -> Iterator[tuple[grpcclient.InferenceServerClient, queue.SimpleQueue[tuple[Any, Any]]]]:
    """A tritonclient gRPC stream whose answers arrive, (result, error), on the queue."""
    arrivals: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    client.start_stream(callback=lambda result, error: arrivals.put((result, error)))
    try:
        yield client, arrivals
    finally:
        client.stop_stream()
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_sequence_model_sees_tritons_flags_and_correlation_id(
    server: RunningServer, protocol: str
) -> None:
    module: Any = httpclient if protocol == "http" else grpcclient
    url = f"127.0.0.1:{server.http_port if protocol == 'http' else server.grpc_port}"
    client = module.InferenceServerClient(url)
    sequence_id = 42 if protocol == "http" else 43

    def send(value: int, start: bool = False, end: bool = False) -> list[int]:
        tensor = module.InferInput("IN", [1], "INT64")
        tensor.set_data_from_numpy(np.array([value], np.int64))
        result = client.infer(
            "running_sum",
            [tensor],
            sequence_id=sequence_id,
            sequence_start=start,
            sequence_end=end,
        )
        return result.as_numpy("OUT").tolist()

    # [sum so far, SEQUENCE_START in request.flags(), SEQUENCE_END in request.flags()]
    assert send(1, start=True) == [1, 1, 0]
    assert send(2) == [3, 0, 0]
    assert send(3, end=True) == [6, 0, 1]
    # A new sequence under the same id starts from zero again: START reset the sum.
    assert send(5, start=True, end=True) == [5, 1, 1]
    client.close()


def test_a_decoupled_sequence_model_takes_a_streamed_sequence(server: RunningServer):
    # tritonclient's stream with sequence_id / sequence_start / sequence_end: the sequence
    # reaches the decoupled model (its correlation ID and flags), as on Triton.
    with _stream(server) as (client, arrivals):
        got = []
        for value, start, end in [(1, True, False), (2, False, False), (3, False, True)]:
            tensor = grpcclient.InferInput("IN", [1], "INT64")
            tensor.set_data_from_numpy(np.array([value], np.int64))
            client.async_stream_infer(
                "running_sum_decoupled",
                [tensor],
                sequence_id=77,
                sequence_start=start,
                sequence_end=end,
            )
            result, error = arrivals.get(timeout=20)
            assert error is None, error.message()
            got.append(result.as_numpy("OUT").tolist())
        # [sum so far, SEQUENCE_START in request.flags(), SEQUENCE_END in request.flags()]
        assert got == [[1, 1, 0], [3, 0, 0], [6, 0, 1]]


def test_a_decoupled_model_that_checks_its_policy_at_load_streams(server: RunningServer):
    with _stream(server) as (client, arrivals):
        tensor = grpcclient.InferInput("IN", [1], "INT64")
        tensor.set_data_from_numpy(np.array([3], np.int64))
        client.async_stream_infer("countdown", [tensor])
        got = []
        for _ in range(3):
            result, error = arrivals.get(timeout=20)
            assert error is None, error.message()
            got.append(int(result.as_numpy("OUT")[0]))
        assert got == [2, 1, 0]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bls_takes_a_bytes_model_name(server: RunningServer, protocol: str) -> None:
    module: Any = httpclient if protocol == "http" else grpcclient
    url = f"127.0.0.1:{server.http_port if protocol == 'http' else server.grpc_port}"
    client = module.InferenceServerClient(url)
    model = module.InferInput("MODEL", [1], "BYTES")
    model.set_data_from_numpy(np.array([b"doubler"], np.object_))
    value = module.InferInput("IN", [1], "INT64")
    value.set_data_from_numpy(np.array([21], np.int64))
    result = client.infer("bls_by_name", [model, value])
    assert result.as_numpy("OUT").tolist() == [42]
    client.close()


@pytest.mark.parametrize("use_async", [False, True])
def test_bls_streams_a_decoupled_models_responses(server: RunningServer, use_async: bool):
    client = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
    count = httpclient.InferInput("IN", [1], "INT64")
    count.set_data_from_numpy(np.array([4], np.int64))
    flag = httpclient.InferInput("ASYNC", [1], "BOOL")
    flag.set_data_from_numpy(np.array([use_async]))
    result = client.infer("bls_stream", [count, flag])
    # 3 + 2 + 1 + 0 from four responses with outputs, then Triton's empty final response.
    assert result.as_numpy("OUT").tolist() == [6, 4, 1]
    # Three responses, the last sent with the final flag: as Triton's iterator, it is the
    # last one given, with no empty response after it (qa/async_execute reads every one).
    count.set_data_from_numpy(np.array([3], np.int64))
    result = client.infer("bls_stream", [count, flag])
    assert result.as_numpy("OUT").tolist() == [3, 3, 0]
    client.close()


def test_async_exec_of_a_decoupled_model_lets_other_executions_run_meanwhile(
    server: RunningServer,
):
    # Four requests at once to a single instance whose async execute awaits
    # async_exec(decoupled=True) on a model that answers after 500 ms: while one waits for
    # its first response the others start theirs (qa/async_execute's BLS case).
    with _stream(server) as (client, arrivals):
        for _ in range(4):
            tensor = grpcclient.InferInput("IN", [1], "INT64")
            tensor.set_data_from_numpy(np.array([500], np.int64))
            client.async_stream_infer("bls_await_first", [tensor])
        seen = []
        for _ in range(4):
            result, error = arrivals.get(timeout=30)
            assert error is None, error.message()
            seen.append(int(result.as_numpy("OUT")[0]))
    assert max(seen) > 1, seen  # one at a time (the loop blocked) would say 1 each


def test_a_model_that_raises_after_its_final_flag_is_logged(server: RunningServer):
    with _stream(server) as (client, arrivals):
        tensor = grpcclient.InferInput("IN", [1], "INT64")
        tensor.set_data_from_numpy(np.array([-1], np.int64))
        client.async_stream_infer("sleeper", [tensor], enable_empty_final_response=True)
        arrivals.get(timeout=20)  # the final flag, sent before the model raised
    words = "ValueError: sleeper got a negative time"  # qa/async_execute looks for these
    for _ in range(100):
        if words in server.output():
            break
        time.sleep(0.1)
    assert words in server.output()


@pytest.mark.parametrize("ignore", [0, 1])
def test_bls_cancel_asks_the_model_to_stop_and_reads_what_it_still_sends(
    server: RunningServer, ignore: int
):
    # As Triton's ResponseIterator.cancel (qa/decoupled's decoupled_bls_cancel): the model
    # sees is_cancelled() and answers CANCELLED, which the caller reads; one that takes no
    # notice goes on, and the caller reads all its responses.
    client = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
    tensor = httpclient.InferInput("IN", [1], "INT64")
    tensor.set_data_from_numpy(np.array([ignore], np.int64))
    flag = httpclient.InferInput("ASYNC", [1], "BOOL")
    flag.set_data_from_numpy(np.array([False]))
    total, cancelled = client.infer("bls_cancel", [tensor, flag]).as_numpy("OUT").tolist()
    client.close()
    if ignore:
        assert (total, cancelled) == (30, 0)
    else:
        assert cancelled == 1
        assert 5 <= total < 30  # stopped soon after the cancel, not run to its end


def test_a_decoupled_models_execute_gets_the_batchs_requests_together(server: RunningServer):
    # Two streamed requests gathered by dynamic batching reach one execute(requests), as
    # in Triton (qa/decoupled's decoupled_execute_error treats requests[0] apart).
    with _stream(server) as (client, arrivals):
        for value in (1, 2):
            tensor = grpcclient.InferInput("IN", [1, 1], "INT64")
            tensor.set_data_from_numpy(np.array([[value]], np.int64))
            client.async_stream_infer("decoupled_batch", [tensor])
        got = []
        for _ in range(2):
            result, error = arrivals.get(timeout=30)
            assert error is None, error.message()
            got.append(result.as_numpy("OUT").ravel().tolist())
    assert sorted(got) == [[2, 0], [2, 1]]


def test_a_decoupled_model_that_returns_responses_is_told_in_tritons_words(
    server: RunningServer,
):
    # qa/decoupled's decoupled_return_response_error compares these words, which name the
    # instance as Triton does (MODEL_0_0).
    with _stream(server) as (client, arrivals):
        tensor = grpcclient.InferInput("IN", [1], "INT64")
        tensor.set_data_from_numpy(np.array([1], np.int64))
        client.async_stream_infer("returns_responses", [tensor])
        _, error = arrivals.get(timeout=20)
    assert error is not None
    assert (
        "Python model 'returns_responses_0_0' is using the decoupled mode and the execute "
        "function must return None." in error.message()
    )


def test_bls_from_a_thread_the_model_started_reaches_the_server(server: RunningServer):
    # A thread inherits no context: exec() there still reaches the server, as in Triton.
    with _stream(server) as (client, arrivals):
        tensor = grpcclient.InferInput("IN", [1], "INT64")
        tensor.set_data_from_numpy(np.array([3], np.int64))
        client.async_stream_infer("bls_from_thread", [tensor])
        got = []
        for _ in range(3):
            result, error = arrivals.get(timeout=20)
            assert error is None, error.message()
            got.append(int(result.as_numpy("OUT")[0]))
    assert got == [2, 1, 0]
