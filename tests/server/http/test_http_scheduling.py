"""The dispatcher never blocks; priority and timeout reach the engine; metrics move."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from conveyor.client import Client, as_completed
from conveyor.errors import DeadlineExceeded
from conveyor.testing import RunningServer
from tests.metrics import pending
from tests.polling import wait_until


def seconds(value: float) -> dict[str, np.ndarray]:
    return {"INPUT0": np.array([value], np.float32)}


def scrape(server: RunningServer) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    # prometheus_client's parser calls a counter's samples "<family>_total" (OpenMetrics);
    # on the wire they carry Triton's names, which are the family names.
    return {
        (
            family.name if family.type == "counter" else sample.name,
            tuple(sorted(sample.labels.items())),
        ): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture(scope="module")
def client(server: RunningServer):
    with Client(server.http_url) as ours:
        yield ours


def test_a_fast_request_is_not_held_behind_a_slow_one(client) -> None:
    slow = client.submit("sleep", seconds(1.0), request_id="slow")
    fast = client.submit("sleep", seconds(0.0), request_id="fast")
    other_model = client.submit("tiny", {"INPUT0": np.zeros((1, 16), np.float32)})
    started = time.monotonic()
    order = [f.request_id for f in as_completed([slow, fast], timeout=30)]
    assert order == ["fast", "slow"]
    assert other_model.result(5)["OUTPUT0"][0, 0] == 1.0
    fast_span = fast.result()["OUTPUT1"]
    slow_span = slow.result()["OUTPUT1"]
    assert fast_span[1] < slow_span[1] - 0.5  # finished long before the slow one did
    # The whole exchange took a few times the slow request's own compute, not more.
    assert time.monotonic() - started < 5 * (slow_span[1] - slow_span[0])


def test_the_event_loop_answers_while_models_compute(server: RunningServer, client) -> None:
    busy = [client.submit("gate", seconds(0.5)) for _ in range(2)]
    with Client(server.http_url) as other:
        assert other.server_ready()
        assert (
            other.submit("tiny", {"INPUT0": np.ones((1, 16), np.float32)}).result(5)["OUTPUT0"][
                0, 0
            ]
            == 2.0
        )
    assert not any(f.done() for f in busy)  # answered while the model still computed
    for future in busy:
        future.result(10)


def test_priority_reaches_the_engine(server: RunningServer, client) -> None:
    # gate has one instance: two blockers keep it busy for ~1 s while the others queue.
    blockers = [client.submit("gate", seconds(0.5)) for _ in range(2)]
    # Requests travel on separate connections and may overtake each other: low must not
    # reach the idle instance first, so wait until a blocker runs and the other queues.
    wait_until(lambda: pending(server, "gate") >= 1)
    low = client.submit("gate", seconds(0.0), priority=-1, request_id="low")
    wait_until(lambda: pending(server, "gate") >= 2)
    default = client.submit("gate", seconds(0.0), request_id="default")
    low_started = low.result(10)["OUTPUT1"][0]
    default_started = default.result(10)["OUTPUT1"][0]
    assert default_started < low_started  # sent last, ran before the low-priority one
    for blocker in blockers:
        blocker.result(10)


def test_priority_from_tritonclient(server: RunningServer, host_port: str, client) -> None:
    """Triton's priority levels, as tritonclient sends them (asyncio client: the sync one
    sends async_infer requests only when its gevent hub runs)."""

    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        async with aioclient.InferenceServerClient(host_port) as triton:
            infer_input = aioclient.InferInput("INPUT0", [1], "FP32")
            infer_input.set_data_from_numpy(np.zeros(1, np.float32))
            low = asyncio.create_task(triton.infer("gate", [infer_input], priority=5))
            while await loop.run_in_executor(None, pending, server, "gate") < 2:
                await asyncio.sleep(0.01)
            default = await triton.infer("gate", [infer_input])
            return (await low).as_numpy("OUTPUT1")[0], default.as_numpy("OUTPUT1")[0]

    blockers = [client.submit("gate", seconds(1.0)) for _ in range(2)]
    wait_until(lambda: pending(server, "gate") >= 1)  # one runs, one queues: gate is busy
    low_started, default_started = asyncio.run(asyncio.wait_for(main(), 20))
    assert default_started < low_started  # Triton level 5 runs after the default level
    for blocker in blockers:
        blocker.result(10)


def test_timeout_reaches_the_engine(server: RunningServer, triton, client) -> None:
    def busy_gate() -> list:
        # Requests travel on separate connections: wait until the blockers are queued.
        blockers = [client.submit("gate", seconds(0.4)) for _ in range(2)]
        wait_until(lambda: pending(server, "gate") >= 1)
        return blockers

    blockers = busy_gate()
    queued = client.submit("gate", seconds(0.0), timeout=0.05)
    with pytest.raises(DeadlineExceeded, match="timeout passed while it was queued"):
        queued.result(10)
    for blocker in blockers:
        blocker.result(10)
    blockers = busy_gate()
    infer_input = httpclient.InferInput("INPUT0", [1], "FP32")
    infer_input.set_data_from_numpy(np.zeros(1, np.float32))
    with pytest.raises(InferenceServerException, match="timeout passed") as error:
        triton.infer("gate", [infer_input], timeout=50_000)  # microseconds
    assert error.value.status() == "503"
    for blocker in blockers:
        blocker.result(10)


def test_metrics_move_after_requests(server: RunningServer, client) -> None:
    labels = (("model", "tiny"), ("version", "1"))
    before = scrape(server)
    futures = [client.submit("tiny", {"INPUT0": np.zeros((1, 16), np.float32)}) for _ in range(5)]
    for future in futures:
        future.result(10)
    after = scrape(server)

    def moved(name: str, key: tuple = labels) -> float:
        return after[(name, key)] - before.get((name, key), 0.0)

    assert moved("nv_inference_request_success") == 5
    assert moved("nv_inference_count") == 5
    assert moved("nv_inference_exec_count") == 5
    assert moved("nv_inference_request_duration_us") > 0
    assert moved("nv_inference_compute_infer_duration_us") > 0
    assert ("nv_inference_queue_duration_us", labels) in after
    assert ("nv_inference_compute_input_duration_us", labels) in after
    assert ("nv_inference_compute_output_duration_us", labels) in after
    assert ("nv_inference_request_failure", labels) in after
    assert after[("nv_inference_pending_request_count", labels)] == 0
    histogram = (*labels, ("protocol", "http"))
    histogram_key = tuple(sorted(histogram))
    assert moved("conveyor_inference_request_duration_seconds_count", histogram_key) == 5
    assert after[("conveyor_inference_request_duration_seconds_sum", histogram_key)] > 0


def test_metric_families_are_declared_under_triton_names(server: RunningServer) -> None:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    # Triton's counters, declared without prometheus_client's "_total" suffix.
    for name in ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count"):
        assert declared[name] == "counter", declared
    assert declared["nv_inference_pending_request_count"] == "gauge"
    assert declared["conveyor_inference_request_duration_seconds"] == "histogram"
    # Every sample belongs to a family declared above it (strict parsers need that).
    family = ""
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            family = line.split()[2]
        elif line and not line.startswith("#"):
            sample = re.split(r"[{ ]", line, maxsplit=1)[0]
            suffix = sample.removeprefix(family)
            assert suffix in ("", "_bucket", "_sum", "_count"), (family, sample)
    assert "_total" not in text


def test_failures_are_counted(server: RunningServer, client) -> None:
    labels = (("model", "gate"), ("version", "1"))
    before = scrape(server).get(("nv_inference_request_failure", labels), 0.0)
    blockers = [client.submit("gate", seconds(0.3)) for _ in range(2)]
    wait_until(lambda: pending(server, "gate") >= 1)
    expired = client.submit("gate", seconds(0.0), timeout=0.01)
    with pytest.raises(DeadlineExceeded):
        expired.result(10)
    for blocker in blockers:
        blocker.result(10)
    wait_until(lambda: scrape(server)[("nv_inference_request_failure", labels)] == before + 1)


def test_metrics_port_answers_404_elsewhere(server: RunningServer) -> None:
    url = server.metrics_url.removesuffix("/metrics") + "/other"
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(url, timeout=10)
    error.value.close()
    assert error.value.code == 404
