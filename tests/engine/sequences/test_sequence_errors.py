"""Each way a sequence request can be wrong or too many is a clear error, and the other
sequences carry on."""

from __future__ import annotations

import itertools
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer
from tests.engine.sequences.client_util import (
    BAD_REQUEST,
    PROTOCOLS,
    UNAVAILABLE,
    add,
    client,
    refused,
)
from tests.engine.sequences.models import IDLE_US
from tests.server.http.http_util import post_json

_ids = itertools.count(5000)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_request_for_a_sequence_never_started(server: RunningServer, protocol: str) -> None:
    conn = client(server, protocol)
    status, message = refused(lambda: add(conn, protocol, "accumulate_native", 1, next(_ids)))
    assert status == BAD_REQUEST[protocol]
    assert "must specify the START flag" in message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_start_for_a_sequence_already_running(server: RunningServer, protocol: str) -> None:
    conn = client(server, protocol)
    sequence = next(_ids)
    assert add(conn, protocol, "accumulate_triton", 4, sequence, start=True) == 4
    status, message = refused(
        lambda: add(conn, protocol, "accumulate_triton", 1, sequence, start=True)
    )
    assert status == BAD_REQUEST[protocol]
    assert "already running" in message
    # The running sequence is untouched by the refused start.
    assert add(conn, protocol, "accumulate_triton", 1, sequence, end=True) == 5


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("model", "sequence_id", "expected"),
    [
        ("accumulate_triton", "abc", "must be an unsigned integer"),
        ("accumulate_triton_str", 42, "must be a string"),
    ],
)
def test_a_sequence_id_of_the_wrong_type(
    server: RunningServer, protocol: str, model: str, sequence_id: int | str, expected: str
) -> None:
    conn = client(server, protocol)
    status, message = refused(lambda: add(conn, protocol, model, 1, sequence_id, start=True))
    assert status == BAD_REQUEST[protocol]
    assert expected in message and "CORRID" in message
    # Triton's words first, as L0_sequence_corrid_batcher matches them.
    sent, wanted = ("BYTES", "UINT64") if isinstance(sequence_id, str) else ("UINT64", "BYTES")
    assert message.startswith(
        f"sequence batching control 'CORRID' data-type is '{sent}', but model '{model}' "
        f"expects '{wanted}': "
    ), message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_request_with_no_sequence_id(server: RunningServer, protocol: str) -> None:
    conn = client(server, protocol)
    status, message = refused(lambda: add(conn, protocol, "accumulate_native", 1, 0))
    assert status == BAD_REQUEST[protocol]
    assert "correlation ID" in message


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ({"sequence_id": 7, "sequence_start": "yes"}, "'sequence_start' must be true or false"),
        ({"sequence_id": -1}, "'sequence_id' must be an unsigned 64-bit integer or a string"),
        ({"sequence_id": 1.5}, "'sequence_id' must be an unsigned 64-bit integer or a string"),
    ],
)
def test_malformed_sequence_parameters(
    server: RunningServer, parameters: dict[str, object], expected: str
) -> None:
    body = {
        "parameters": parameters,
        "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1], "data": [1]}],
    }
    status, answer = post_json(server.http_url, "/v2/models/accumulate_native/infer", body)
    assert status == 400
    assert expected in answer["error"]


def test_more_sequences_than_slots_wait_then_are_refused(server: RunningServer) -> None:
    """one_slot_patient has one slot and room for one waiting sequence: of two sequences
    started while the slot is held, one waits until the holder ends, the other is refused
    at once; other models are unaffected."""
    model = "one_slot_patient"
    conn = client(server, "http")
    first, second, third = next(_ids), next(_ids), next(_ids)
    assert add(conn, "http", model, 1, first, start=True) == 1

    def start(sequence: int, protocol: str) -> tuple[str, str]:
        # Closed on the thread that made it: a gevent client left to the garbage collector
        # warns of its unclosed socket in whichever test collects it.
        own = client(server, protocol)
        try:
            return "ran", str(add(own, protocol, model, 20, sequence, start=True))
        except InferenceServerException as exc:
            return str(exc.status()), str(exc.message())
        finally:
            own.close()

    with ThreadPoolExecutor(2) as pool:
        starts = {
            second: pool.submit(start, second, "grpc"),
            third: pool.submit(start, third, "http"),
        }
        done, _ = wait(starts.values(), timeout=30, return_when=FIRST_COMPLETED)
        (refusal,) = done
        status, message = refusal.result()
        assert status in (UNAVAILABLE["http"], UNAVAILABLE["grpc"])
        assert "max_queued_sequences" in message
        waiting = next(f for f in starts.values() if f is not refusal)
        assert not waiting.done()
        # Another model's sequences run meanwhile.
        other = next(_ids)
        assert add(conn, "http", "accumulate_native", 3, other, start=True, end=True) == 3
        assert add(conn, "http", model, 2, first, end=True) == 3
        assert waiting.result(timeout=30) == ("ran", "20")
    waiting_id = next(s for s, f in starts.items() if f is waiting)
    assert add(conn, "http", model, 1, waiting_id, end=True) == 21


def test_an_idle_sequence_loses_its_slot(server: RunningServer) -> None:
    """A sequence silent past max_sequence_idle_microseconds frees its slot for a waiting
    sequence; its own next request is told why it is refused."""
    conn = client(server, "grpc")
    abandoned, waiting_id = next(_ids), next(_ids)
    assert add(conn, "grpc", "one_slot", 5, abandoned, start=True) == 5
    with ThreadPoolExecutor(1) as pool:
        # Waits for the slot; gets it once the abandoned sequence has been idle long enough.
        waiter = client(server, "grpc")  # grpc's client may be used and closed on any thread
        try:
            waiting = pool.submit(add, waiter, "grpc", "one_slot", 7, waiting_id, start=True)
            assert waiting.result(timeout=30) == 7
        finally:
            waiter.close()
    status, message = refused(lambda: add(conn, "grpc", "one_slot", 1, abandoned))
    assert status == BAD_REQUEST["grpc"]
    assert "idle" in message and str(IDLE_US) in message
    assert add(conn, "grpc", "one_slot", 1, waiting_id, end=True) == 8


def test_an_idle_sequence_is_released_without_any_other_request(server: RunningServer) -> None:
    conn = client(server, "http")
    sequence = next(_ids)
    assert add(conn, "http", "accumulate_native", 1, sequence, start=True) == 1
    assert add(conn, "http", "one_slot", 1, sequence, start=True) == 1
    time.sleep(IDLE_US / 1e6 * 1.5)
    status, message = refused(lambda: add(conn, "http", "one_slot", 1, sequence))
    assert status == BAD_REQUEST["http"] and "idle" in message
    # The model with a longer idle timeout still holds its sequence of the same id.
    assert add(conn, "http", "accumulate_native", 1, sequence, end=True) == 2


def test_a_sequence_model_failure_fails_only_its_request(server: RunningServer) -> None:
    conn = client(server, "http")
    sequence = next(_ids)
    assert add(conn, "http", "accumulate_native", 1, sequence, start=True) == 1
    # A BYTES value for an INT32 input fails before it is queued: the sequence carries on.
    bad = httpclient.InferInput("INPUT", [1], "BYTES")
    bad.set_data_from_numpy(np.array([b"x"], dtype=object))
    status, _ = refused(lambda: conn.infer("accumulate_native", [bad], sequence_id=sequence))
    assert status == "400"
    assert add(conn, "http", "accumulate_native", 1, sequence, end=True) == 2
