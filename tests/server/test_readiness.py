"""Strict readiness and the statuses of a model that fails to load, as Triton answers them,
over HTTP and gRPC (tritonclient), on a repository with one good model and one broken one.

- Strict readiness (the default): the server is not ready while a model it was asked to
  load is not READY; ``--no-strict-readiness`` relaxes it. Model readiness is the same
  either way: the good model ready, the broken one not.
- Inference on the broken model: 404 / NOT_FOUND, as Triton's core answers a model with no
  version to serve (not 503: retrying will not help), in Triton's words and then the load
  error; a request naming the version that failed: 503 / UNAVAILABLE, "version N is not
  at ready state" as Triton's core answers. An explicit load that fails: 400 /
  INVALID_ARGUMENT (Triton's too), with why.
- ``conveyor models`` exits 1 when a model failed to load, 0 when every model loaded.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.examples import onnx_models
from conveyor.testing import RunningServer, run_server
from tests.models import ECHO_CONFIG, RepoBuilder
from tests.polling import wait_until
from tests.server.http.http_util import get_json, post_json

WHY = "no GPU on this test machine"
BROKEN_MODEL = f"""
class Model:
    def load(self, config):
        raise RuntimeError("{WHY}")

    def infer(self, inputs):
        return {{}}
"""


def repository(root: Path, *, broken: bool = True) -> Path:
    onnx_models.tiny(root / "good" / "1" / "model.onnx")
    if broken:
        RepoBuilder(root).python("broken", BROKEN_MODEL, ECHO_CONFIG.format(datatype="FP32"))
    return root


def wait_loaded(server: RunningServer, timeout: float = 60.0) -> None:
    """Until the server has tried every model (none LOADING); readiness may stay false."""
    entries: list = []

    def tried_every_model() -> bool:
        nonlocal entries
        assert server.process.poll() is None, server.output()
        try:
            status, entries = post_json(server.http_url, "/v2/repository/index", {})
        except OSError:
            status, entries = 0, []
        return status == 200 and bool(entries) and all(e["state"] != "LOADING" for e in entries)

    wait_until(tried_every_model, timeout, lambda: f"models loaded (index: {entries})", 0.05)


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[RunningServer]:
    with run_server(repository(tmp_path), wait=False) as server:
        wait_loaded(server)
        yield server


@pytest.fixture
def relaxed(tmp_path: Path) -> Iterator[RunningServer]:
    with run_server(repository(tmp_path), extra_args=["--no-strict-readiness"]) as server:
        yield server


def clients(
    server: RunningServer,
) -> tuple[httpclient.InferenceServerClient, grpcclient.InferenceServerClient]:
    return (
        httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}"),
        grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}"),
    )


def fp32_input(module: object) -> object:
    x = module.InferInput("INPUT0", [1, 1], "FP32")  # type: ignore[attr-defined]
    x.set_data_from_numpy(np.zeros((1, 1), np.float32))
    return x


def test_a_failed_model_makes_the_server_not_ready_by_default(strict: RunningServer) -> None:
    status, body = get_json(strict.http_url, "/v2/health/ready")
    # Not ready answers 400 (with why), as Triton's /v2/health/ready does; never 200.
    assert status == 400, body
    assert "broken" in body["error"] and WHY in body["error"]
    http, grpc = clients(strict)
    with http, grpc:
        assert http.is_server_live() and grpc.is_server_live()
        assert http.is_server_ready() is False
        assert grpc.is_server_ready() is False
        # Per-model readiness does not change with the option.
        assert http.is_model_ready("good") and grpc.is_model_ready("good")
        assert not http.is_model_ready("broken") and not grpc.is_model_ready("broken")


def test_the_start_log_says_what_health_ready_answers(
    strict: RunningServer, relaxed: RunningServer
) -> None:
    assert get_json(strict.http_url, "/v2/health/ready")[0] == 400
    assert strict.stop() == 0
    log = strict.output()
    assert "ready: serving" not in log, log
    warning = "WARNING conveyor.server: not ready (/v2/health/ready answers 400): "
    assert f"{warning}a model failed to load: 'broken'" in log
    assert WHY in log and "serving good;" in log and "--no-strict-readiness" in log
    assert get_json(relaxed.http_url, "/v2/health/ready")[0] == 200
    assert relaxed.stop() == 0
    log = relaxed.output()
    assert "INFO conveyor.server: ready: serving good (failed to load: broken)" in log, log
    assert "not ready" not in log


def test_relaxed_readiness_leaves_the_server_ready(relaxed: RunningServer) -> None:
    assert get_json(relaxed.http_url, "/v2/health/ready")[0] == 200
    http, grpc = clients(relaxed)
    with http, grpc:
        assert http.is_server_ready() is True
        assert grpc.is_server_ready() is True
        assert http.is_model_ready("good") and grpc.is_model_ready("good")
        assert not http.is_model_ready("broken") and not grpc.is_model_ready("broken")


def test_inference_on_a_model_that_failed_to_load_is_not_found_with_the_load_error(
    relaxed: RunningServer,
) -> None:
    status, body = post_json(
        relaxed.http_url,
        "/v2/models/broken/infer",
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [0.0]}]},
    )
    assert status == 404, body
    assert body["error"].startswith(
        "Request for unknown model: 'broken' has no available versions: "  # Triton's words
        "model 'broken' is not ready: it failed to load: "
    )
    assert WHY in body["error"]
    http, grpc = clients(relaxed)
    with http, grpc:
        with pytest.raises(InferenceServerException) as over_http:
            http.infer("broken", [fp32_input(httpclient)])
        assert over_http.value.status() == "404"
        assert WHY in over_http.value.message()
        with pytest.raises(InferenceServerException) as over_grpc:
            grpc.infer("broken", [fp32_input(grpcclient)], client_timeout=30)
        assert over_grpc.value.status() == "StatusCode.NOT_FOUND"
        assert "failed to load" in over_grpc.value.message() and WHY in over_grpc.value.message()
        # Its metadata and config: the same answer (there is no version to describe).
        assert get_json(relaxed.http_url, "/v2/models/broken/config")[0] == 404
        # The good model serves all along.
        x = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
        x.set_data_from_numpy(np.zeros((1, 16), np.float32))
        assert grpc.infer("good", [x]).as_numpy("OUTPUT0")[0, 0] == 1.0


def test_a_request_naming_the_version_that_failed_is_unavailable_in_tritons_words(
    relaxed: RunningServer,
) -> None:
    """Triton's core knows the version and answers it is not ready (UNAVAILABLE), not that
    the model has no versions; the load error follows its words."""
    words = "Request for unknown model: 'broken' version 1 is not at ready state: "
    status, body = post_json(
        relaxed.http_url,
        "/v2/models/broken/versions/1/infer",
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [0.0]}]},
    )
    assert status == 503, body
    assert body["error"].startswith(words + "model 'broken' version 1 failed to load: "), body
    assert WHY in body["error"]
    http, grpc = clients(relaxed)
    with http, grpc:
        with pytest.raises(InferenceServerException) as over_grpc:
            grpc.infer("broken", [fp32_input(grpcclient)], model_version="1", client_timeout=30)
        assert over_grpc.value.status() == "StatusCode.UNAVAILABLE"
        assert over_grpc.value.message().startswith(words), over_grpc.value.message()
        assert WHY in over_grpc.value.message()
        # A version the model never had is still not found.
        with pytest.raises(InferenceServerException) as unknown:
            grpc.infer("broken", [fp32_input(grpcclient)], model_version="7", client_timeout=30)
        assert unknown.value.status() == "StatusCode.NOT_FOUND"


def test_an_explicit_load_that_fails_answers_400_with_why(tmp_path: Path) -> None:
    args = ["--model-control", "explicit", "--load-model", "good"]
    with run_server(repository(tmp_path), extra_args=args) as server:
        http, grpc = clients(server)
        with http, grpc:
            # Never asked to load, the broken model does not hold readiness back.
            assert http.is_server_ready() and grpc.is_server_ready()
            status, body = post_json(server.http_url, "/v2/repository/models/broken/load", {})
            assert status == 400, body
            assert "'broken' failed to load" in body["error"] and WHY in body["error"]
            # Asked to load and failed: strict readiness now says not ready, on both.
            assert not http.is_server_ready() and not grpc.is_server_ready()
            with pytest.raises(InferenceServerException) as over_grpc:
                grpc.load_model("broken")
            assert over_grpc.value.status() == "StatusCode.INVALID_ARGUMENT"
            assert WHY in over_grpc.value.message()
            with pytest.raises(InferenceServerException) as over_http:
                http.load_model("broken")
            assert over_http.value.status() == "400" and WHY in over_http.value.message()
            # Unloaded on purpose, it no longer counts (as Triton's strict readiness).
            grpc.unload_model("broken")
            assert http.is_server_ready() and grpc.is_server_ready()


def conveyor_models(repository_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conveyor", "models", str(repository_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_conveyor_models_exits_non_zero_when_a_model_failed(tmp_path: Path) -> None:
    failed = conveyor_models(repository(tmp_path / "with_broken"))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "broken" in failed.stderr
    assert "good" in failed.stdout and "READY" in failed.stdout
    loaded = conveyor_models(repository(tmp_path / "all_good", broken=False))
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
