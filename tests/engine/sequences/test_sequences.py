"""Sequences over HTTP and gRPC with tritonclient: running sums stay exact per sequence."""

from __future__ import annotations

import itertools
import queue
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import RunningServer
from tests.engine.sequences.client_util import PROTOCOLS, TRITON_MODELS, add, client

_ids = itertools.count(1000)


@pytest.mark.parametrize("model", TRITON_MODELS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_sequence_sums_its_own_values(server: RunningServer, protocol: str, model: str) -> None:
    conn = client(server, protocol)
    sequence = next(_ids)
    sums = [add(conn, protocol, model, 5, sequence, start=True)]
    sums += [add(conn, protocol, model, v, sequence) for v in (1, 2, 3)]
    sums.append(add(conn, protocol, model, 10, sequence, end=True))
    assert sums == [5, 6, 8, 11, 21]
    # Once ended, the same id starts afresh.
    assert add(conn, protocol, model, 7, sequence, start=True, end=True) == 7


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["accumulate_triton_str", "accumulate_native"])
def test_string_sequence_ids(server: RunningServer, protocol: str, model: str) -> None:
    conn = client(server, protocol)
    name = f"session-{next(_ids)}"
    assert add(conn, protocol, model, 2, name, start=True) == 2
    assert add(conn, protocol, model, 3, name) == 5
    assert add(conn, protocol, model, 4, name, end=True) == 9


def test_string_and_integer_ids_are_different_sequences(server: RunningServer) -> None:
    conn = client(server, "grpc")
    number = next(_ids)
    assert add(conn, "grpc", "accumulate_native", 1, number, start=True) == 1
    assert add(conn, "grpc", "accumulate_native", 100, str(number), start=True) == 100
    assert add(conn, "grpc", "accumulate_native", 1, number, end=True) == 2
    assert add(conn, "grpc", "accumulate_native", 100, str(number), end=True) == 200


@pytest.mark.parametrize("model", TRITON_MODELS)
def test_interleaved_sequences_from_many_clients_keep_exact_sums(
    server: RunningServer, model: str
) -> None:
    """16 clients, half HTTP and half gRPC, each running 3 sequences of 8 values in turn;
    every sequence's sums are those of its own values only, whatever ran beside it."""

    def run(worker: int) -> list[tuple[list[int], list[int]]]:
        protocol = PROTOCOLS[worker % 2]
        conn = client(server, protocol)
        outcomes = []
        for round_ in range(3):
            sequence = next(_ids)
            values = [worker * 100 + round_ * 10 + step for step in range(8)]
            sums = [
                add(conn, protocol, model, v, sequence, start=i == 0, end=i == len(values) - 1)
                for i, v in enumerate(values)
            ]
            outcomes.append((sums, list(np.cumsum(values))))
        return outcomes

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(run, range(16)))
    for outcomes in results:
        for got, expected in outcomes:
            assert got == expected


def test_sequences_over_the_grpc_stream(server: RunningServer) -> None:
    """tritonclient's stream, as simple_grpc_sequence_stream_infer_client.py drives it: two
    sequences interleaved on one stream, each answer tagged with its request's id."""
    answers: queue.Queue[tuple[object, object]] = queue.Queue()
    conn = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    conn.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        first, second = next(_ids), next(_ids)
        values = [(first, 1), (second, 100), (first, 2), (second, 200), (first, 3), (second, 300)]
        for index, (sequence, value) in enumerate(values):
            data = np.array([[value]], dtype=np.int32)
            tensor = grpcclient.InferInput("INPUT", [1, 1], "INT32")
            tensor.set_data_from_numpy(data)
            conn.async_stream_infer(
                "accumulate_triton",
                [tensor],
                request_id=str(index),
                sequence_id=sequence,
                sequence_start=index < 2,
                sequence_end=index >= 4,
            )
        got = {}
        for _ in values:
            result, error = answers.get(timeout=30)
            assert error is None, error
            got[result.get_response().id] = int(result.as_numpy("OUTPUT").ravel()[0])
    finally:
        conn.stop_stream()
    assert [got[str(i)] for i in range(6)] == [1, 100, 3, 300, 6, 600]


def test_requests_of_one_sequence_sent_without_waiting_all_count(server: RunningServer) -> None:
    """Requests of one sequence sent at once (separate RPCs, in no set order) run one at a
    time on one instance: every one of them is added exactly once."""
    conn = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    sequence = next(_ids)
    answers: queue.Queue[tuple[int, int]] = queue.Queue()

    def done(index: int, result: grpcclient.InferResult, error: object) -> None:
        assert error is None, error
        answers.put((index, int(result.as_numpy("OUTPUT").ravel()[0])))

    for index in range(10):
        tensor = grpcclient.InferInput("INPUT", [1], "INT32")
        tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
        conn.async_infer(
            "accumulate_native",
            [tensor],
            partial(done, index),
            sequence_id=sequence,
            sequence_start=index == 0,
            sequence_end=index == 9,
        )
        # The start must be queued before later requests of its sequence are sent.
        if index == 0:
            answers.put(answers.get(timeout=30))
    got = dict(answers.get(timeout=30) for _ in range(10))
    assert sorted(got.values()) == list(range(1, 11))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_model_without_sequence_batching_ignores_sequence_ids(
    server: RunningServer, protocol: str
) -> None:
    """As Triton does: a stateless model answers each request alike, sequence or not."""
    module = httpclient if protocol == "http" else grpcclient
    tensor = module.InferInput("INPUT0", [1, 2], "INT32")
    tensor.set_data_from_numpy(np.array([[4, 5]], dtype=np.int32))
    result = client(server, protocol).infer(
        "stateless", [tensor], sequence_id=next(_ids), sequence_start=True
    )
    assert result.as_numpy("OUTPUT0").tolist() == [[4, 5]]
