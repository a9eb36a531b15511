"""The oldest strategy on a real server: concurrent sequences share executions, each
sequence's sums stay exact, and wrong requests are refused as under direct."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import RunningServer
from tests.engine.sequences.client_util import BAD_REQUEST, PROTOCOLS, client, refused
from tests.engine.sequences.oldest.models import MODELS

_ids = itertools.count(1000)
SEQUENCES = 8  # as many as the model's candidate slots: every one runs at once
STEPS = 6


def step(
    conn: Any, protocol: str, model: str, value: int, sequence_id: int, **flags: bool
) -> tuple[int, int]:
    """One request of a sequence: (the running sum, the rows of its execution)."""
    module = httpclient if protocol == "http" else grpcclient
    tensor = module.InferInput("INPUT", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
    result = conn.infer(
        model,
        [tensor],
        sequence_id=sequence_id,
        sequence_start=flags.get("start", False),
        sequence_end=flags.get("end", False),
    )
    return int(result.as_numpy("OUTPUT").ravel()[0]), int(result.as_numpy("ROWS").ravel()[0])


def run_sequence(server: RunningServer, protocol: str, model: str, seed: int) -> list[int]:
    """Send STEPS values; check every running sum; return the rows each request ran with."""
    conn = client(server, protocol)
    sequence_id = next(_ids)
    values = [seed * 10 + i for i in range(STEPS)]
    rows = []
    for i, value in enumerate(values):
        total, batch = step(
            conn, protocol, model, value, sequence_id, start=i == 0, end=i == STEPS - 1
        )
        assert total == sum(values[: i + 1]), f"sequence {sequence_id} step {i}"
        rows.append(batch)
    return rows


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", MODELS)
def test_concurrent_sequences_share_executions_and_keep_exact_sums(
    server: RunningServer, protocol: str, model: str
) -> None:
    with ThreadPoolExecutor(SEQUENCES) as pool:
        futures = [
            pool.submit(run_sequence, server, protocol, model, seed) for seed in range(SEQUENCES)
        ]
        rows = [batch for future in futures for batch in future.result(timeout=60)]
    assert max(rows) > 1, "no execution held requests of two sequences"
    assert max(rows) <= 4, "an execution held more rows than max_batch_size"


def test_a_lone_sequence_runs_after_the_queue_delay(server: RunningServer) -> None:
    """With nobody to batch with, a request still runs (once max_queue_delay passes)."""
    conn = client(server, "grpc")
    sequence_id = next(_ids)
    assert step(conn, "grpc", "oldest_triton", 5, sequence_id, start=True) == (5, 1)
    assert step(conn, "grpc", "oldest_triton", 6, sequence_id, end=True) == (11, 1)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_request_for_a_sequence_never_started(server: RunningServer, protocol: str) -> None:
    conn = client(server, protocol)
    status, message = refused(lambda: step(conn, protocol, "oldest_triton", 1, next(_ids)))
    assert status == BAD_REQUEST[protocol]
    assert "must specify the START flag" in message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_start_for_a_sequence_already_running(server: RunningServer, protocol: str) -> None:
    conn = client(server, protocol)
    sequence_id = next(_ids)
    assert step(conn, protocol, "oldest_state", 4, sequence_id, start=True)[0] == 4
    status, message = refused(
        lambda: step(conn, protocol, "oldest_state", 1, sequence_id, start=True)
    )
    assert status == BAD_REQUEST[protocol]
    assert "already running" in message
    assert step(conn, protocol, "oldest_state", 1, sequence_id, end=True)[0] == 5


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_request_with_no_sequence_id(server: RunningServer, protocol: str) -> None:
    conn = client(server, protocol)
    status, message = refused(lambda: step(conn, protocol, "oldest_state", 1, 0))
    assert status == BAD_REQUEST[protocol]
    assert "correlation ID" in message


def test_a_string_id_for_an_integer_corrid(server: RunningServer) -> None:
    conn = client(server, "http")
    module = httpclient
    tensor = module.InferInput("INPUT", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[1]], dtype=np.int32))
    status, message = refused(
        lambda: conn.infer("oldest_triton", [tensor], sequence_id="abc", sequence_start=True)
    )
    assert status == BAD_REQUEST["http"]
    assert "must be an unsigned integer" in message and "CORRID" in message


def test_the_model_config_names_the_oldest_strategy(server: RunningServer) -> None:
    config = client(server, "http").get_model_config("oldest_triton")
    oldest = config["sequence_batching"]["oldest"]
    assert oldest["max_candidate_sequences"] == 8
    assert oldest["max_queue_delay_microseconds"] == 20000
    assert "direct" not in config["sequence_batching"]
