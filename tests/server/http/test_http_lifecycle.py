"""Startup, model control and graceful stop, each on a server process of its own."""

from __future__ import annotations

import gc
import json
import signal
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from conveyor.client import Client
from conveyor.errors import ModelNotReady, Unavailable
from conveyor.examples import onnx_models
from conveyor.testing import run_server, wait_ready
from tests.models import ECHO_CONFIG, RepoBuilder
from tests.polling import wait_until
from tests.server.http.http_util import get_json, post_json, request

SLOW_LOAD_MODEL = """
import time
import urllib.request

class Model:
    def load(self, config):
        time.sleep(2.0)

    def infer(self, inputs):
        return {"OUTPUT0": inputs["INPUT0"], "OUTPUT1": inputs["INPUT0"]}
"""


def test_ready_answers_400_until_the_models_are_loaded(tmp_path: Path) -> None:
    RepoBuilder(tmp_path).python("slow_load", SLOW_LOAD_MODEL, ECHO_CONFIG.format(datatype="FP32"))
    with run_server(tmp_path, wait=False) as server:

        def live() -> bool:
            try:
                return request(server.http_url, "GET", "/v2/health/live", timeout=1)[0] == 200
            except OSError:
                return False

        wait_until(live, 20, "live")
        status, error = get_json(server.http_url, "/v2/health/ready")
        assert status == 400  # as Triton: not 503, not 200
        assert "not ready" in error["error"]
        status, error = get_json(server.http_url, "/v2/models/slow_load")
        assert status == 503 and "loading" in error["error"]
        wait_ready(server.http_url, 30, server.process)
        assert get_json(server.http_url, "/v2/models/slow_load/ready")[0] == 200


def test_model_control_explicit(tmp_path: Path) -> None:
    onnx_models.tiny(tmp_path / "tiny" / "1" / "model.onnx")
    RepoBuilder(tmp_path).echo_model("echo", "FP32")
    args = ["--model-control", "explicit", "--load-model", "tiny"]
    with run_server(tmp_path, extra_args=args) as server:
        triton = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            states = {e["name"]: e["state"] for e in triton.get_model_repository_index()}
            assert states == {"tiny": "READY", "echo": "UNAVAILABLE"}
            assert not triton.is_model_ready("echo")
            triton.load_model("echo")
            assert triton.is_model_ready("echo")
            triton.unload_model("tiny")
            assert not triton.is_model_ready("tiny")
            x = httpclient.InferInput("INPUT0", [1, 16], "FP32")
            x.set_data_from_numpy(np.zeros((1, 16), np.float32))
            with pytest.raises(InferenceServerException, match="not ready") as error:
                triton.infer("tiny", [x])
            assert error.value.status() == "503"
            with pytest.raises(InferenceServerException, match="not in the repository"):
                triton.load_model("nothing_here")
            status, body = post_json(
                server.http_url,
                "/v2/repository/models/echo/load",
                {"parameters": {"config": json.dumps({"max_batch_size": -3})}},
            )
            assert status == 400 and "max_batch_size: must be >= 0" in body["error"]
            assert triton.is_model_ready("echo")  # a failed reload keeps what was serving
            triton.load_model("tiny")
            assert triton.infer("tiny", [x]).as_numpy("OUTPUT0")[0, 0] == 1.0
        finally:
            triton.close()
            # tritonclient's __del__ fails on any thread but this one (gevent): collect here.
            del triton
            gc.collect()


def test_sigterm_under_load_answers_every_admitted_request(tmp_path: Path) -> None:
    RepoBuilder(tmp_path).sleep_model("sleep", instances=2)
    with run_server(tmp_path) as server, Client(server.http_url) as client:
        futures = [
            client.submit("sleep", {"INPUT0": np.array([0.3], np.float32)}, request_id=str(i))
            for i in range(12)
        ]

        def admitted() -> float:
            # queued + done; at most 2 more are running (2 instances, busy while any queue)
            with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
                text = response.read().decode()
            values = {
                family.name: sample.value  # a counter's samples parse as "<family>_total"
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.labels.get("model") == "sleep"
            }
            return values["nv_inference_pending_request_count"] + values["nv_inference_count"]

        wait_until(lambda: admitted() >= 10, 20, "12 admitted")  # all 12 are in the engine
        server.process.send_signal(signal.SIGTERM)
        results = [f.result(30) for f in futures]  # every one answered, none lost
        assert [r["OUTPUT0"][0] for r in results] == [np.float32(0.3)] * 12
        assert server.process.wait(30) == 0
        with pytest.raises((Unavailable, ModelNotReady)):
            client.submit("sleep", {"INPUT0": np.array([0.0], np.float32)}).result(10)
        assert "draining" in server.output()
