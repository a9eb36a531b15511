"""Every V2 route besides infer: health, metadata, config, statistics, repository."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.protocol.datatypes import DATATYPES
from conveyor.testing import RunningServer
from tests.server.http.http_util import get_json, post_json, request


def test_health(triton, server: RunningServer) -> None:
    assert triton.is_server_live()
    assert triton.is_server_ready()
    status, _, body = request(server.http_url, "GET", "/v2/health/live")
    assert (status, body) == (200, b'{"live":true}')  # KServe's clients read the body


def test_server_metadata(triton) -> None:
    metadata = triton.get_server_metadata()
    assert metadata["name"] == "conveyor"
    assert metadata["version"]
    assert {"binary_tensor_data", "statistics", "model_repository"} <= set(metadata["extensions"])


def test_model_metadata(triton) -> None:
    assert triton.get_model_metadata("tiny") == {
        "name": "tiny",
        "versions": ["1"],
        "platform": "onnxruntime_onnx",
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]}],
        "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 16]}],
    }
    # With batching on, the batch dimension is prepended as -1.
    batched = triton.get_model_metadata("batched", "1")
    assert batched["inputs"][0]["shape"] == [-1, 16]
    assert triton.get_model_metadata("echo_BYTES")["platform"] == "python"


def test_model_ready(triton) -> None:
    assert triton.is_model_ready("tiny")
    assert triton.is_model_ready("tiny", "1")
    assert not triton.is_model_ready("tiny", "7")
    assert not triton.is_model_ready("no_such_model")


def test_model_config_is_tritons_json(triton) -> None:
    config = triton.get_model_config("batched")
    assert config["name"] == "batched"
    assert config["max_batch_size"] == 8
    assert config["input"] == [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]}]
    assert config["output"] == [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [16]}]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 100
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    assert triton.get_model_config("tiny")["max_batch_size"] == 0
    assert triton.get_model_config("echo_BYTES")["input"][0]["data_type"] == "TYPE_STRING"


def test_statistics_move_after_inference(triton) -> None:
    def stats() -> dict:
        (entry,) = triton.get_inference_statistics("tiny")["model_stats"]
        return entry

    before = stats()
    infer_input = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    infer_input.set_data_from_numpy(np.zeros((1, 16), np.float32))
    for _ in range(3):
        triton.infer("tiny", [infer_input])
    after = stats()
    assert after["name"] == "tiny" and after["version"] == "1"
    assert after["inference_count"] - before["inference_count"] == 3
    assert (
        after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"]
        == 3
    )
    assert after["inference_stats"]["compute_infer"]["ns"] > 0
    assert after["batch_stats"][0]["batch_size"] == 1
    every = triton.get_inference_statistics()["model_stats"]
    assert {s["name"] for s in every} >= {"tiny", "batched", *(f"echo_{d}" for d in DATATYPES)}
    assert triton.get_inference_statistics("tiny", "1")["model_stats"][0]["version"] == "1"


def test_repository_index(triton, server: RunningServer) -> None:
    index = triton.get_model_repository_index()
    names = {entry["name"] for entry in index}
    assert {"tiny", "batched", "sleep", "gate"} <= names
    assert all(entry["state"] == "READY" for entry in index)
    status, ready_only = post_json(server.http_url, "/v2/repository/index", {"ready": True})
    assert status == 200 and len(ready_only) == len(index)


def test_model_control_is_off_by_default(triton) -> None:
    with pytest.raises(InferenceServerException, match="--model-control explicit") as error:
        triton.unload_model("tiny")
    assert error.value.status() == "400"
    with pytest.raises(InferenceServerException, match="model control is disabled"):
        triton.load_model("tiny")
    assert triton.is_model_ready("tiny")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/", 404),
        ("GET", "/v1/nothing", 404),  # /v1/embeddings and /v1/models are OpenAI's
        ("GET", "/v2/nothing", 404),
        ("POST", "/v2/health/ready", 405),
        ("GET", "/v2/models/tiny/infer", 405),
        ("POST", "/v2/models/tiny", 405),
        ("GET", "/v2/models/tiny/versions/1/bogus", 404),
        ("GET", "/v2/models/no_such_model", 404),
        ("GET", "/v2/models/tiny/versions/9", 404),
        ("GET", "/v2/models/tiny/versions/x/config", 400),
    ],
)
def test_unknown_routes_answer_json_errors(
    server: RunningServer, method: str, path: str, status: int
) -> None:
    got, headers, body = request(server.http_url, method, path)
    assert got == status
    assert headers["content-type"] == "application/json"
    assert b'"error"' in body


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/v2/models/tiny/infer", "POST"),
        ("GET", "/v2/models/tiny/versions/1/infer", "POST"),
        ("GET", "/v2/models/no_such_model/infer", "POST"),  # the route is there either way
        ("GET", "/v2/models/tiny/generate", "POST"),
        ("PUT", "/v2/models/tiny/versions/1/ready", "GET, HEAD"),
        ("POST", "/v2/models/tiny/config", "GET, HEAD"),
        ("DELETE", "/v2", "GET, HEAD"),
        ("GET", "/v2/repository/index", "POST"),
        ("GET", "/v2/repository/models/tiny/load", "POST"),
        ("DELETE", "/v2/logging", "GET, HEAD, POST"),
        ("PUT", "/v2/models/tiny/trace/setting", "GET, HEAD, POST"),
        ("POST", "/v2/systemsharedmemory/status", "GET, HEAD"),
        ("GET", "/v2/systemsharedmemory/region/r/register", "POST"),
    ],
)
def test_a_route_asked_with_another_method_is_405_with_allow(
    server: RunningServer, method: str, path: str, allow: str
) -> None:
    got, headers, body = request(server.http_url, method, path)
    assert got == 405, body
    assert headers["allow"] == allow
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error.startswith("Method Not Allowed: ")  # Triton's words, then ours
    *others, last = allow.split(", ")
    takes = f"{', '.join(others)} or {last}" if others else last
    assert f"{path} takes {takes}, not {method}" in error
    # The route still answers its own method (a 405 is not a broken route).
    if path == "/v2/models/tiny/infer":
        status, _ = post_json(server.http_url, path, {"inputs": []})
        assert status == 400  # the request is wrong, not the method


def test_the_metrics_port_answers_405_to_other_methods(server: RunningServer) -> None:
    metrics = f"http://127.0.0.1:{server.metrics_port}"
    got, headers, _ = request(metrics, "POST", "/metrics")
    assert got == 405 and headers["allow"] == "GET, HEAD"
    assert request(metrics, "GET", "/metrics")[0] == 200


def test_metadata_over_raw_http(server: RunningServer) -> None:
    status, body = get_json(server.http_url, "/v2/models/tiny/versions/1")
    assert status == 200 and body["name"] == "tiny"
    status, body = get_json(server.http_url, "/v2/models/tiny/versions/1/stats")
    assert status == 200 and body["model_stats"][0]["version"] == "1"
