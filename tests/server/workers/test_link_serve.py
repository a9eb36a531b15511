"""The link between front-end processes and the engine process, under real load: calls
and replies coalesced many to a read or write, lean and pickled frames interleaved, frames
split across reads, and a call cancelled while it waits in the engine's queue."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families

from conveyor.client import Client
from conveyor.protocol.datatypes import DATATYPES
from conveyor.server.metrics import PENDING
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder, RunLog
from tests.polling import wait_until
from tests.server.workers.workers_util import success_count, wait_front_ends
from tests.tensors import sample

pytestmark = pytest.mark.workers

REQUESTS = 240
CONCURRENCY = 16


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = RepoBuilder(tmp_path_factory.mktemp("link-repo"))
    builder.tiny()
    builder.echo_model("echo")
    builder.echo_model("echo_bytes", "BYTES")
    builder.run_logging_model("runs")
    builder.every_datatype_echo("echo_all")
    return builder.path


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    with run_server(repository, extra_args=["--workers", "2"]) as running:
        wait_front_ends(running, 2)
        yield running


def tiny_request(module: Any, url: str, index: int) -> np.ndarray:
    """One request on its own connection (so either front end may take it); its output."""
    client = module.InferenceServerClient(url)
    try:
        tensor = module.InferInput("INPUT0", [1, 16], "FP32")
        tensor.set_data_from_numpy(np.full((1, 16), index, np.float32))
        result = client.infer("tiny", [tensor], request_id=str(index))
        response = result.get_response()
        assert (response["id"] if module is httpclient else response.id) == str(index)
        output: np.ndarray = result.as_numpy("OUTPUT0")
        return output
    finally:
        client.close()


def echo_bytes_request(url: str, index: int) -> np.ndarray:
    client = httpclient.InferenceServerClient(url)
    try:
        tensor = httpclient.InferInput("INPUT0", [1, 2], "BYTES")
        tensor.set_data_from_numpy(np.array([[b"call", str(index).encode()]], dtype=object))
        output: np.ndarray = client.infer("echo_bytes", [tensor]).as_numpy("OUTPUT0")
        return output
    finally:
        client.close()


def test_many_concurrent_requests_over_both_protocols_get_their_own_answers(
    server: RunningServer,
) -> None:
    http_url = server.http_url.removeprefix("http://")
    grpc_url = server.grpc_url.removeprefix("grpc://")
    before = success_count(httpclient.InferenceServerClient(http_url), "tiny")
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        tiny = {
            i: pool.submit(tiny_request, httpclient if i % 2 else grpcclient,
                           http_url if i % 2 else grpc_url, i)
            for i in range(REQUESTS)
        }  # fmt: skip
        # Pickled calls (BYTES tensors have no lean frame) interleaved with the lean ones.
        pickled = {i: pool.submit(echo_bytes_request, http_url, i) for i in range(0, REQUESTS, 8)}
        for i, future in tiny.items():
            np.testing.assert_array_equal(future.result(60), np.full((1, 16), i + 1, np.float32))
        for i, future in pickled.items():
            assert future.result(60).tolist() == [[b"call", str(i).encode()]]
    after = success_count(httpclient.InferenceServerClient(http_url), "tiny")
    assert after - before == REQUESTS


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_every_datatype_crosses_both_ways_exactly(server: RunningServer, scheme: str) -> None:
    # Numeric tensors travel in lean frames, BYTES and BF16 in pickled ones: both exact.
    url = server.http_url if scheme == "http" else server.grpc_url
    with Client(url) as client:
        for datatype in DATATYPES:
            array = sample(datatype)
            inputs = {f"IN_{datatype}": array}
            got = client.submit("echo_all", inputs, outputs=[f"OUT_{datatype}"]).result(30)
            echoed = got[f"OUT_{datatype}"]
            assert echoed.dtype == array.dtype and echoed.shape == array.shape, datatype
            assert echoed.tolist() == array.tolist(), datatype


@pytest.mark.parametrize("megabytes", [1, 24])
def test_a_tensor_larger_than_a_socket_read_arrives_whole(
    server: RunningServer, megabytes: int
) -> None:
    # Its call and its reply each span many reads of the link's socket.
    array = np.random.default_rng(megabytes).random((1, megabytes << 18), dtype=np.float32)
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    tensor = httpclient.InferInput("INPUT0", list(array.shape), "FP32")
    tensor.set_data_from_numpy(array, binary_data=True)
    outputs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in ("OUTPUT0", "OUTPUT1")]
    result = client.infer("echo", [tensor], outputs=outputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), array)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), array)


def test_a_call_whose_client_went_away_is_dropped_from_the_queue(
    server: RunningServer, repository: Path
) -> None:
    runs = RunLog(repository)
    runs.clear()
    busy = _send_tagged(server, "busy", 1.5)
    runs.wait_for("busy")  # the one instance is busy: the next request waits in the queue
    gone = _send_tagged(server, "gone", 0.0)
    wait_until(lambda: _pending(server) == 1, 10, "the second request queued")
    gone.close()  # its client went away while it waited: the front end cancels the call
    wait_until(lambda: _pending(server) == 0, 10, "the second request dropped")
    assert busy.getresponse().status == 200
    busy.close()
    probe = _send_tagged(server, "after", 0.0)  # queued behind "gone" had it stayed
    assert probe.getresponse().status == 200
    probe.close()
    assert runs.tags() == ["busy", "after"]


def _send_tagged(server: RunningServer, tag: str, seconds: float) -> http.client.HTTPConnection:
    """Send one request to the run-logging model on a new connection; do not read it."""
    inputs = [
        {"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [seconds]},
        {"name": "TAG", "shape": [1], "datatype": "BYTES", "data": [tag]},
    ]
    connection = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
    connection.request("POST", "/v2/models/runs/infer", json.dumps({"inputs": inputs}))
    return connection


def _pending(server: RunningServer) -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for point in family.samples:
            if point.name == PENDING and point.labels.get("model") == "runs":
                return point.value
    raise AssertionError(f"no {PENDING} for model 'runs' in the metrics")
