"""``conveyor serve --workers 2``: both protocols, through either front-end process, over
one engine: one set of statistics, one repository, one shared-memory registry."""

from __future__ import annotations

import concurrent.futures
import inspect
import queue
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from conveyor.server.dataplane import DataPlane
from conveyor.server.workers.messages import ControlMethod
from conveyor.server.workers.remote import RemoteDataPlane
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder
from tests.server.shm.shm_util import region
from tests.server.workers.workers_util import (
    http_client,
    paused,
    success_count,
    tiny_input,
    wait_front_ends,
)

pytestmark = pytest.mark.workers


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    builder = RepoBuilder(tmp_path_factory.mktemp("workers-repo"))
    builder.tiny()
    builder.echo_model("echo")
    builder.sleep_model("sleep", instances=1)
    args = ["--workers", "2", "--model-control", "explicit", "--load-model", "tiny"]
    args += ["--load-model", "sleep"]
    with run_server(builder.path, extra_args=args) as running:
        wait_front_ends(running, 2)
        yield running


@pytest.fixture
def pids(server: RunningServer) -> list[int]:
    return wait_front_ends(server, 2)


@pytest.fixture
def grpc_client(server: RunningServer) -> Iterator[Any]:
    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    yield client
    client.close()


def test_every_public_data_plane_method_is_forwarded() -> None:
    # A method added to DataPlane but not to RemoteDataPlane would run against no engine
    # in a front-end process and answer "starting" forever.
    # DataPlane's own methods and those of the extensions it is made of (tracing).
    public = {
        name: value
        for cls in DataPlane.__mro__[:-1]
        for name, value in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(value)
    }
    public.pop("live")  # answered locally: a process that answers is live
    # Sampling starts and ends in the front end that took the request (off there).
    public.pop("begin_trace")
    public.pop("finish_trace")
    missing = set(public) - set(vars(RemoteDataPlane))
    assert not missing


def test_every_control_message_names_a_data_plane_method() -> None:
    for method in ControlMethod:
        assert inspect.isfunction(getattr(DataPlane, method.value, None)), method


def test_settings_and_cuda_status_are_answered_through_a_front_end(
    server: RunningServer, grpc_client: Any
) -> None:
    # Each is a control call the engine process must accept (they answered 500 once).
    http = http_client(server)
    assert http.get_log_settings()["log_verbose_level"] == 0
    assert http.get_trace_settings()["trace_level"] == ["OFF"]
    assert http.get_cuda_shared_memory_status() == []
    logging = grpc_client.get_log_settings(as_json=True)
    assert logging["settings"]["log_info"]["bool_param"] is True
    trace = grpc_client.get_trace_settings(as_json=True)
    assert trace["settings"]["trace_level"]["value"] == ["OFF"]
    assert grpc_client.get_cuda_shared_memory_status(as_json=True) == {}


def test_unary_and_control_calls_over_both_protocols(
    server: RunningServer, grpc_client: Any
) -> None:
    http = http_client(server)
    for client, module in ((http, httpclient), (grpc_client, grpcclient)):
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("tiny")
        result = client.infer("tiny", [tiny_input(module)])
        np.testing.assert_array_equal(
            result.as_numpy("OUTPUT0"), np.arange(16, dtype=np.float32).reshape(1, 16) + 1
        )
        metadata = client.get_model_metadata("tiny")
        name = metadata["name"] if isinstance(metadata, dict) else metadata.name
        assert name == "tiny"
        assert client.get_model_config("tiny")
        assert client.get_model_repository_index()
    # Errors keep their status across the process boundary.
    with pytest.raises(InferenceServerException) as caught:
        http.infer("missing", [tiny_input(httpclient)])
    assert caught.value.status() == "404"
    with pytest.raises(InferenceServerException) as caught:
        grpc_client.infer("missing", [tiny_input(grpcclient)])
    assert caught.value.status() == "StatusCode.NOT_FOUND"


def test_statistics_and_metrics_count_requests_from_both_front_ends(
    server: RunningServer, pids: list[int], grpc_client: Any
) -> None:
    first, second = pids
    before = success_count(grpc_client, "tiny")
    for busy in (first, second):
        with paused(busy):  # the other front end takes every new connection
            client = http_client(server)
            for _ in range(3):
                client.infer("tiny", [tiny_input(httpclient)])
            client.close()
    assert success_count(grpc_client, "tiny") == before + 6
    with paused(first):
        assert success_count(http_client(server), "tiny") == before + 6
    with paused(second):
        assert success_count(http_client(server), "tiny") == before + 6
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    line = next(
        x for x in text.splitlines() if x.startswith('nv_inference_request_success{model="tiny"')
    )
    assert float(line.rsplit(" ", 1)[1]) == before + 6


def test_a_model_loaded_through_one_front_end_is_served_by_the_other(
    server: RunningServer, pids: list[int], grpc_client: Any
) -> None:
    first, second = pids
    with paused(second):
        http_client(server).load_model("echo")
    try:
        with paused(first):
            assert http_client(server).is_model_ready("echo")
        assert grpc_client.is_model_ready("echo")
    finally:
        with paused(first):
            http_client(server).unload_model("echo")
    with paused(second):
        assert not http_client(server).is_model_ready("echo")


def test_a_region_registered_through_one_front_end_is_usable_through_the_other(
    server: RunningServer, pids: list[int]
) -> None:
    first, second = pids
    data = np.arange(16, dtype=np.float32).reshape(1, 16)
    with region(data.nbytes * 2, "conveyor_workers") as (name, key, handle):
        shm.set_shared_memory_region(handle, [data])
        with paused(second):
            http_client(server).register_system_shared_memory(name, key, data.nbytes * 2)
        try:
            with paused(first):
                client = http_client(server)
                tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
                tensor.set_shared_memory(name, data.nbytes)
                output = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
                output.set_shared_memory(name, data.nbytes, offset=data.nbytes)
                client.infer("tiny", [tensor], outputs=[output])
            written = shm.get_contents_as_numpy(handle, np.float32, [1, 16], offset=data.nbytes)
            np.testing.assert_array_equal(written, data + 1)
        finally:
            http_client(server).unregister_system_shared_memory(name)


def test_model_stream_infer_to_a_model_that_is_not_decoupled(server: RunningServer) -> None:
    answers: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        for i in range(3):
            client.async_stream_infer("tiny", [tiny_input(grpcclient)], request_id=str(i))
        results = [answers.get(timeout=30) for _ in range(3)]
    finally:
        client.stop_stream()
        client.close()
    assert [error for _, error in results] == [None] * 3
    assert sorted(result.get_response().id for result, _ in results) == ["0", "1", "2"]


def test_a_grpc_deadline_reaches_the_engine_queue(server: RunningServer, grpc_client: Any) -> None:
    def sleep_input(seconds: float) -> Any:
        tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(np.array([seconds], np.float32))
        return tensor

    before = success_count(grpc_client, "sleep")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        busy = pool.submit(grpc_client.infer, "sleep", [sleep_input(1.5)])
        time.sleep(0.5)  # the one instance is busy; the next request waits in the queue
        with pytest.raises(InferenceServerException) as caught:
            grpc_client.infer("sleep", [sleep_input(0.0)], client_timeout=0.3)
        assert "DEADLINE_EXCEEDED" in str(caught.value.status())
        busy.result(30)
    # The late request was dropped from the queue: it never ran after the first one.
    assert success_count(grpc_client, "sleep") == before + 1
