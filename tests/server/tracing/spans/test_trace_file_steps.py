"""Trace mode triton: the trace file holds the new timestamps in order (the read's start,
the send's end, each response of a decoupled model), and an ensemble's steps as objects of
their own whose parent_id is the ensemble request's id, as Triton writes them."""

from __future__ import annotations

import gc
import json
import queue
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import run_server
from tests.polling import wait_until
from tests.server.tracing.spans.span_util import repeat_inputs

ENGINE = ["REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
          "COMPUTE_OUTPUT_START", "COMPUTE_END"]  # fmt: skip


def names(trace: dict[str, Any]) -> list[str]:
    return [stamp["name"] for stamp in trace["timestamps"]]


def in_order(trace: dict[str, Any]) -> bool:
    times = [stamp["ns"] for stamp in trace["timestamps"]]
    return times == sorted(times)


def test_trace_file_has_receive_send_responses_and_ensemble_steps(
    repository: Path, tmp_path: Path
) -> None:
    trace_file = tmp_path / "trace.json"
    config = ["level=TIMESTAMPS", "rate=1", f"triton,file={trace_file}", "triton,log-frequency=1"]
    args = [arg for entry in config for arg in ("--trace-config", entry)]
    with run_server(repository, extra_args=args) as server:
        http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        grpc = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
        try:
            tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
            tensor.set_data_from_numpy(np.zeros((1, 16), np.float32))
            http.infer("tiny", [tensor], request_id="plain")
            raw = grpcclient.InferInput("RAW", [1, 16], "FP32")
            raw.set_data_from_numpy(np.ones((1, 16), np.float32))
            grpc.infer("pipeline", [raw], request_id="ensemble")
            answers: queue.Queue[Any] = queue.Queue()
            grpc.start_stream(callback=lambda result, error: answers.put(error))
            try:
                grpc.async_stream_infer("repeat", repeat_inputs(2), request_id="decoupled")
                assert [answers.get(timeout=20) for _ in range(2)] == [None, None]
            finally:
                grpc.stop_stream()

            def written() -> list[dict[str, Any]]:
                try:
                    return list(json.loads(trace_file.read_text()))
                except (FileNotFoundError, json.JSONDecodeError):
                    return []

            # tiny, the ensemble and its two steps, the streamed request
            wait_until(lambda: len(written()) == 5, timeout=20, what="five trace objects")
        finally:
            http.close()
            grpc.close()
            del http, grpc
            gc.collect()
    traces = written()
    assert all(in_order(trace) for trace in traces)
    [plain] = [t for t in traces if t["request_id"] == "plain"]
    assert names(plain) == [
        "HTTP_RECV_START", "HTTP_RECV_END", *ENGINE, "REQUEST_END", "HTTP_SEND_START",
        "HTTP_SEND_END",
    ]  # fmt: skip
    ensemble = [t for t in traces if t["request_id"] == "ensemble"]
    [parent] = [t for t in ensemble if "parent_id" not in t]
    assert parent["model_name"] == "pipeline"
    assert names(parent) == [
        "GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "REQUEST_START", "REQUEST_END",
        "GRPC_SEND_START", "GRPC_SEND_END",
    ]  # fmt: skip
    steps = sorted(
        (t for t in ensemble if "parent_id" in t), key=lambda t: t["timestamps"][0]["ns"]
    )
    assert [step["model_name"] for step in steps] == ["double", "tiny"]
    for step in steps:
        assert step["parent_id"] == parent["id"]
        assert step["id"] not in {t["id"] for t in traces if t is not step}
        assert names(step) == [*ENGINE, "REQUEST_END"]
    [streamed] = [t for t in traces if t["request_id"] == "decoupled"]
    stamps = names(streamed)
    assert stamps.count("INFER_RESPONSE_COMPLETE") == 2
    assert stamps[:5] == ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "REQUEST_START",
                          "QUEUE_START", "COMPUTE_START"]  # fmt: skip
    assert stamps[-3:] == ["REQUEST_END", "GRPC_SEND_START", "GRPC_SEND_END"]
