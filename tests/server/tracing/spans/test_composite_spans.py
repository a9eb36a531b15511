"""Streamed and composite requests traced: each request of a ModelStreamInfer stream gets
its own trace, a decoupled model's responses are events; generate and generate_stream are
traced; an ensemble's steps are child spans named after their models."""

from __future__ import annotations

import json
import queue
import urllib.request
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient

from conveyor.testing import RunningServer
from tests.server.tracing.otlp_receiver import Received
from tests.server.tracing.spans.span_util import RequestSpans, repeat_inputs, spans_of

RESPONSE = "INFER_RESPONSE_COMPLETE"


def response_events(request: RequestSpans) -> list[str]:
    compute = request.children()["compute"]
    return [name for name in compute.events if name == RESPONSE]


def test_each_request_of_a_stream_is_traced_on_its_own(
    exported: tuple[RunningServer, Received], clients: dict[str, Any]
) -> None:
    client = clients["grpc"]
    answers: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        for index in range(3):
            tensor = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
            tensor.set_data_from_numpy(np.full((1, 16), index, np.float32))
            client.async_stream_infer("tiny", [tensor], request_id=f"stream-{index}")
        client.async_stream_infer("repeat", repeat_inputs(3), request_id="stream-decoupled")
        for _ in range(3 + 3):  # three answers, three responses
            _, error = answers.get(timeout=20)
            assert error is None, error
    finally:
        client.stop_stream()
    unary = spans_of(
        exported[1],
        3,
        lambda s: (
            str(s.attributes["request_id"]).startswith("stream-")
            and s.attributes["model_name"] == "tiny"
        ),
    )
    assert sorted(r.root.attributes["request_id"] for r in unary) == [
        "stream-0", "stream-1", "stream-2"
    ]  # fmt: skip
    assert len({r.root.span_id for r in unary}) == 3
    for request in unary:
        assert request.root.attributes["protocol"] == "grpc"
        assert {"receive", "decode", "queue", "compute", "encode", "send"} <= set(
            request.children()
        )
        assert not request.root.error
    [decoupled] = spans_of(
        exported[1], 1, lambda s: s.attributes["request_id"] == "stream-decoupled"
    )
    assert decoupled.root.attributes["model_name"] == "repeat"
    assert {"decode", "queue", "compute"} <= set(decoupled.children())
    assert response_events(decoupled) == [RESPONSE] * 3  # one per response
    assert decoupled.root.events.count(RESPONSE) == 3
    assert not decoupled.root.error


def post(server: RunningServer, path: str, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(
        server.http_url + path, data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        assert response.status == 200
        return bytes(response.read())


def test_generate_and_generate_stream_are_traced(
    exported: tuple[RunningServer, Received],
) -> None:
    server, received = exported
    events = post(server, "/v2/models/repeat/generate_stream", {"COUNT": 4, "DELAY_MS": 1})
    assert events.count(b"data: ") == 4
    [streamed] = spans_of(received, 1, lambda s: s.attributes["model_name"] == "repeat"
                          and s.attributes["protocol"] == "http")  # fmt: skip
    assert response_events(streamed) == [RESPONSE] * 4
    assert {"decode", "queue", "compute", "encode", "send"} <= set(streamed.children())
    assert not streamed.root.error
    answer = json.loads(post(server, "/v2/models/repeat/generate", {"COUNT": 1, "DELAY_MS": 1}))
    assert answer["OUT"] == 0
    both = spans_of(received, 2, lambda s: s.attributes["model_name"] == "repeat"
                    and s.attributes["protocol"] == "http")  # fmt: skip
    assert response_events(both[1]) == [RESPONSE]


def test_ensemble_steps_are_child_spans_named_after_their_models(
    exported: tuple[RunningServer, Received], clients: dict[str, Any]
) -> None:
    tensor = grpcclient.InferInput("RAW", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 16), np.float32))
    result = clients["grpc"].infer("pipeline", [tensor], request_id="pipelined")
    np.testing.assert_array_equal(result.as_numpy("RESULT"), np.full((1, 16), 3.0))
    [request] = spans_of(exported[1], 1, lambda s: s.attributes["request_id"] == "pipelined")
    assert request.root.attributes["model_name"] == "pipeline"
    children = request.children()
    assert {"double", "tiny", "receive", "decode", "encode", "send"} <= set(children)
    double, tiny = children["double"], children["tiny"]
    assert double.end <= tiny.start  # tiny reads what double made
    for step, model in ((double, "double"), (tiny, "tiny")):
        assert step.attributes["model_name"] == model
        assert step.attributes["model_version"] == "1"
        assert step.attributes["request_id"] == "pipelined"
        assert step.attributes["batch_size"] == 1
        inside = request.children(step)
        assert {"queue", "compute"} <= set(inside), model
        assert step.start <= inside["queue"].start and inside["compute"].end <= step.end
        assert {"compute_input", "compute_infer", "compute_output"} <= set(
            request.children(inside["compute"])
        )
