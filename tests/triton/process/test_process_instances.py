"""Triton Python models on process instances: a real server, driven with tritonclient."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from tests.polling import wait_until
from tests.triton.process.models import build_repository


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("triton-process"))


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    models = ("add_sub", "tell", "who_am_i", "init_args")
    loads = [arg for name in models for arg in ("--load-model", name)]
    args = ["--model-control", "explicit", *loads]
    with run_server(repository, extra_args=args) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


def _ask(url: str, protocol: str, value: float) -> tuple[int, str, list[float], dict[str, str]]:
    lib = httpclient if protocol == "http" else grpcclient
    client = lib.InferenceServerClient(url)
    try:
        x = lib.InferInput("X", [4], "FP32")
        x.set_data_from_numpy(np.full(4, value, np.float32))
        result = client.infer("who_am_i", [x])
        instance = result.as_numpy("INSTANCE")[0]
        return (
            int(result.as_numpy("PID")[0]),
            instance.decode() if isinstance(instance, bytes) else str(instance),
            result.as_numpy("DOUBLED").tolist(),
            json.loads(result.as_numpy("TOLD")[0]),
        )
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_each_process_instance_runs_its_own_model_in_its_own_process(
    server: RunningServer, protocol: str
):
    url = (server.http_url if protocol == "http" else server.grpc_url).split("://")[1]
    seen: dict[str, int] = {}

    def both_instances_answered() -> bool:
        # Concurrent GIL-bound requests spread over the two worker processes.
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda v: _ask(url, protocol, v), [1.0, 2.0, 3.0, 4.0]))
        for (pid, instance, doubled, told), value in zip(
            answers, [1.0, 2.0, 3.0, 4.0], strict=True
        ):
            assert doubled == [2 * value] * 4  # BLS: add_sub ran through the engine
            assert told == {"asked_by": instance}  # BLS request parameters from a worker
            assert seen.setdefault(instance, pid) == pid  # an instance keeps its process
        return len(seen) == 2

    wait_until(both_instances_answered, timeout=60, interval=0.2)
    assert set(seen) == {"who_am_i_0_0", "who_am_i_0_1"}
    assert len(set(seen.values())) == 2
    assert server.process.pid not in seen.values()


def test_outputs_keep_the_shape_the_model_gave_them_on_a_process_instance(
    server: RunningServer,
):
    # Triton's init_args answers [1] for dims [-1] under max_batch_size 64, from a worker.
    client = httpclient.InferenceServerClient(server.http_url.split("://")[1])
    try:
        tensor = httpclient.InferInput("IN", [2, 2], "FP32")
        tensor.set_data_from_numpy(np.zeros((2, 2), np.float32))
        assert client.infer("init_args", [tensor]).as_numpy("OUT").tolist() == [7.0]
    finally:
        client.close()


def test_finalize_runs_in_each_worker_on_unload(server: RunningServer, repository: Path):
    url = server.http_url.split("://")[1]
    pid, *_ = _ask(url, "http", 1.0)
    client = httpclient.InferenceServerClient(url)
    try:
        client.unload_model("who_am_i")
    finally:
        client.close()
    log = repository / "who_am_i" / "1" / "finalized.log"
    wait_until(lambda: log.exists() and len(log.read_text().splitlines()) == 2, timeout=30)
    lines = [line.split() for line in log.read_text().splitlines()]
    assert sorted(name for _, name in lines) == ["who_am_i_0_0", "who_am_i_0_1"]
    assert str(pid) in {p for p, _ in lines}
    assert str(server.process.pid) not in {p for p, _ in lines}
