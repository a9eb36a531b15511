"""Faults in models, against the real server with Triton's own clients (issue 6, item 3).

- ``faulty`` raises, or returns a wrong name, dtype or shape, or a non-array, as its MODE
  input says: only that request fails, 500 / INTERNAL with what was wrong.
- ``hang`` (2 thread instances) and ``hang_proc`` (1 process instance) sleep INPUT0 seconds
  with ``execution_timeout_s = 0.5``: an execution that overruns fails with the timeout; the
  thread model is reported not ready while both instances are stuck and serves again once
  they return; the process model's worker is killed and replaced, so it stays ready.
- ``broken`` fails to load: the others serve, and the index and the log say why.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.examples import onnx_models
from conveyor.testing import RunningServer, run_server
from tests.models import SLEEP_CONFIG, SLEEP_MODEL, RepoBuilder
from tests.polling import wait_until
from tests.server.http.http_util import get_json, post_json

TIMEOUT_S = 0.5  # the hang models' execution_timeout_s
HANG_S = 6.0  # how long a hung execution sleeps: far past the timeout, and bounded

FAULTY_MODEL = """
import numpy as np

class Model:
    def infer(self, inputs):
        mode = inputs["MODE"].ravel()[0].decode()
        good = np.ones(1, np.float32)
        if mode == "raise":
            raise RuntimeError("weights are corrupt")
        if mode == "wrong_name":
            return {"OUTPUT9": good}
        if mode == "wrong_dtype":
            return {"OUTPUT0": np.ones(1, np.int64)}
        if mode == "wrong_shape":
            return {"OUTPUT0": np.ones((2, 3), np.float32)}
        if mode == "not_array":
            return {"OUTPUT0": [1.0]}
        return {"OUTPUT0": good}
"""

FAULTY_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "MODE"
datatype = "BYTES"
shape = [1]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [1]
"""

BROKEN_MODEL = """
class Model:
    def load(self, config):
        raise FileNotFoundError("weights.bin is missing from the version folder")

    def infer(self, inputs):
        return inputs
"""

# mode -> what the error message must say
FAULTS = {
    "raise": "RuntimeError: weights are corrupt",
    "wrong_name": "did not return output 'OUTPUT0'",
    "wrong_dtype": "returned datatype INT64 for output 'OUTPUT0'; expected FP32",
    "wrong_shape": "returned shape [2, 3] for output 'OUTPUT0'; expected [1]",
    "not_array": "returned list for output 'OUTPUT0'; expected numpy.ndarray",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("faults")
    onnx_models.tiny(root / "tiny" / "1" / "model.onnx")
    repo = RepoBuilder(root)
    repo.python("faulty", FAULTY_MODEL, FAULTY_CONFIG)
    hang = SLEEP_CONFIG.format(instances=2, queue=8)
    repo.python("hang", SLEEP_MODEL, f"execution_timeout_s = {TIMEOUT_S}\n{hang}")
    hang_proc = SLEEP_CONFIG.format(instances=1, queue=8)
    repo.python(
        "hang_proc",
        SLEEP_MODEL,
        f'instance_kind = "process"\nexecution_timeout_s = {TIMEOUT_S}\n{hang_proc}',
    )
    repo.python("broken", BROKEN_MODEL, FAULTY_CONFIG)
    # Relaxed readiness: a model that fails to load must leave the server ready here (strict
    # readiness, the default, is tested in tests/server/test_readiness.py).
    with run_server(root, extra_args=["--no-strict-readiness"]) as running:
        yield running
        assert running.process.poll() is None, running.output()


def http_post(server: RunningServer, model: str, body: dict) -> tuple[int, dict]:
    return post_json(server.http_url, f"/v2/models/{model}/infer", body, timeout=30)


def http_get(server: RunningServer, path: str) -> int:
    return get_json(server.http_url, path)[0]


def sleep_body(seconds: float) -> dict:
    return {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [seconds]}]}


def index(server: RunningServer) -> dict[str, dict]:
    status, entries = post_json(server.http_url, "/v2/repository/index", {})
    assert status == 200, entries
    return {entry["name"]: entry for entry in entries}


def tiny_still_serves(server: RunningServer) -> None:
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [1] * 16}]}
    status, answer = http_post(server, "tiny", body)
    assert status == 200, answer
    assert answer["outputs"][0]["data"] == [2.0] * 16


def grpc_mode_input(mode: str) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput("MODE", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([mode.encode()], dtype=object))
    return tensor


@pytest.mark.parametrize("mode", list(FAULTS))
def test_a_faulty_model_fails_only_that_request_with_what_was_wrong(
    server: RunningServer, mode: str
) -> None:
    body = {"inputs": [{"name": "MODE", "shape": [1], "datatype": "BYTES", "data": [mode]}]}
    status, answer = http_post(server, "faulty", body)
    assert status == 500, answer
    assert FAULTS[mode] in answer["error"]

    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        with pytest.raises(InferenceServerException) as caught:
            client.infer("faulty", [grpc_mode_input(mode)], client_timeout=30)
        assert caught.value.status() == "StatusCode.INTERNAL"
        assert FAULTS[mode] in caught.value.message()
        # The same model answers its next good request, and so does every other model.
        good = client.infer("faulty", [grpc_mode_input("ok")], client_timeout=30)
        assert good.as_numpy("OUTPUT0").tolist() == [1.0]
    tiny_still_serves(server)


def test_a_hung_thread_model_times_out_goes_unready_and_recovers(server: RunningServer) -> None:
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        # Two hung executions hold both thread instances.
        hung = [pool.submit(http_post, server, "hang", sleep_body(HANG_S)) for _ in range(2)]
        answers = [future.result(timeout=30) for future in hung]
        failed_after = time.monotonic() - started
        for status, answer in answers:
            assert status == 500, answer
            assert (
                f"did not finish within its execution_timeout_s of {TIMEOUT_S:g} s"
                in answer["error"]
            )
        # Failed at the timeout, not when the sleeps end.
        assert failed_after < HANG_S - 1.5, failed_after

        # While both instances are stuck the model is not ready, on every surface, and a
        # new request is refused as unavailable (retry later) instead of queueing forever.
        assert http_get(server, "/v2/models/hang/ready") == 400
        with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
            assert client.is_model_ready("hang") is False
            assert client.is_model_ready("tiny") is True
        entry = index(server)["hang"]
        assert entry["state"] == "UNAVAILABLE"
        assert "all 2 of its instances are stuck" in entry["reason"]
        status, answer = http_post(server, "hang", sleep_body(0.0))
        assert status == 503, answer
        assert "is not ready: all 2 of its instances are stuck" in answer["error"]
        assert time.monotonic() - started < HANG_S, "the checks above ran too late to count"
        tiny_still_serves(server)

    # The stuck executions return by themselves: the model serves again.
    wait_until(lambda: http_get(server, "/v2/models/hang/ready") == 200, 20, "hang ready")
    assert index(server)["hang"]["state"] == "READY"
    status, answer = http_post(server, "hang", sleep_body(0.0))
    assert status == 200, answer
    assert "did not finish within its execution_timeout_s" in server.output()


def test_a_hung_process_model_is_killed_replaced_and_stays_ready(server: RunningServer) -> None:
    tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.array([HANG_S], np.float32))
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        started = time.monotonic()
        with pytest.raises(InferenceServerException) as caught:
            client.infer("hang_proc", [tensor], client_timeout=30)
        assert time.monotonic() - started < HANG_S - 1.5
        assert caught.value.status() == "StatusCode.INTERNAL"
        assert "was killed and replaced" in caught.value.message()
        assert client.is_model_ready("hang_proc") is True
        tensor.set_data_from_numpy(np.array([0.0], np.float32))
        result = client.infer("hang_proc", [tensor], client_timeout=30)
        assert result.as_numpy("OUTPUT0").tolist() == [0.0]


def test_a_model_that_fails_to_load_leaves_the_others_serving(server: RunningServer) -> None:
    entry = index(server)["broken"]
    assert entry["state"] == "UNAVAILABLE"
    assert "weights.bin is missing from the version folder" in entry["reason"]
    assert "weights.bin is missing from the version folder" in server.output()
    assert http_get(server, "/v2/health/ready") == 200
    assert http_get(server, "/v2/models/broken/ready") == 400
    status, answer = http_post(server, "broken", {"inputs": []})
    # 404, as Triton (no version to serve): it will not serve if retried (503 would say so)
    assert status == 404, answer
    assert "weights.bin is missing" in answer["error"]
    with httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}") as client:
        assert client.is_model_ready("tiny") is True
    tiny_still_serves(server)
