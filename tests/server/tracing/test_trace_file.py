"""trace_mode triton against a real server: Triton's JSON trace file, one object per sampled
request, its timestamps in the order they happened; the rate and the count decide which
requests are traced; the file is written every log_frequency traces and at shutdown."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import run_server
from tests.polling import wait_until

ENGINE_STEPS = [
    "REQUEST_START",
    "QUEUE_START",
    "COMPUTE_START",
    "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START",
    "COMPUTE_END",
    "REQUEST_END",
]
ORDER = {  # the *_START of the read and the *_END of the send were added since
    "http": ["HTTP_RECV_START", "HTTP_RECV_END", *ENGINE_STEPS, "HTTP_SEND_START", "HTTP_SEND_END"],
    "grpc": [
        "GRPC_WAITREAD_START", "GRPC_WAITREAD_END", *ENGINE_STEPS, "GRPC_SEND_START",
        "GRPC_SEND_END",
    ],
}  # fmt: skip


def infer(client: Any, module: Any, request_id: str, model: str = "tiny") -> None:
    data = np.arange(16, dtype=np.float32).reshape(1, 16)
    tensor = module.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(data)
    result = client.infer(model, [tensor], request_id=request_id)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data + 1)


def traces(path: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads(path.read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def test_trace_file_holds_ordered_timestamps_per_request(repository: Path, tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.json"
    config = [
        "triton,file=" + str(trace_file),
        "triton,log-frequency=1",
        "level=TIMESTAMPS",
        "rate=1",
    ]
    args = [arg for entry in config for arg in ("--trace-config", entry)]
    with run_server(repository, extra_args=args) as server:
        http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        grpc = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
        try:
            infer(http, httpclient, "over-http")
            infer(grpc, grpcclient, "over-grpc", model="batched")
            wait_until(lambda: len(traces(trace_file)) == 2, what="two traces in the file")
            written = {t["request_id"]: t for t in traces(trace_file)}
            for request_id, protocol, model in (
                ("over-http", "http", "tiny"),
                ("over-grpc", "grpc", "batched"),
            ):
                trace = written[request_id]
                assert trace["model_name"] == model
                assert trace["model_version"] == 1
                names = [stamp["name"] for stamp in trace["timestamps"]]
                assert names == ORDER[protocol]
                times = [stamp["ns"] for stamp in trace["timestamps"]]
                assert times == sorted(times), trace
            assert written["over-http"]["id"] != written["over-grpc"]["id"]

            # 1 of every 2 requests, 2 traces at most; the count left reads 0 after.
            http.update_trace_settings(settings={"trace_rate": "2", "trace_count": "2"})
            for n in range(8):
                infer(http, httpclient, f"sampled-{n}")
            wait_until(lambda: len(traces(trace_file)) == 4, what="two more traces")
            assert http.get_trace_settings()["trace_count"] == "0"
            sampled = [t["request_id"] for t in traces(trace_file)[2:]]
            assert sampled == ["sampled-1", "sampled-3"]

            # log_frequency 0: kept until shutdown, then written.
            http.update_trace_settings(settings={"trace_count": "1", "log_frequency": "0"})
            infer(http, httpclient, "at-shutdown-0")
            infer(http, httpclient, "at-shutdown-1")
        finally:
            http.close()
            grpc.close()
            del http, grpc
            gc.collect()
        assert server.stop() == 0
    written = traces(trace_file)
    assert len(written) == 5
    assert written[-1]["request_id"] == "at-shutdown-1"
