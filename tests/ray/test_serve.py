"""The repository on a real local Ray cluster, driven over HTTP with tritonclient.

One cluster (``ray start --head``, 2 CPUs, token authentication on) and one application
deployed by ``conveyor ray deploy`` for the whole module: starting Ray and its replicas is
what takes the time. Replicas ask for a quarter CPU each (the default), so every
deployment, a scaled-up replica and a replacement fit on 2 CPUs. This process connects
too, as a driver, to read Serve's status and to reach a replica through its handle.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
http = pytest.importorskip("tritonclient.http")

from ray._raylet import Config  # noqa: E402

from conveyor.ray import APP_NAME  # noqa: E402
from conveyor.testing import free_port  # noqa: E402
from tests.engine.sequences.models import NATIVE_CONFIG, NATIVE_MODEL  # noqa: E402
from tests.models import RepoBuilder  # noqa: E402
from tests.polling import wait_until  # noqa: E402
from tests.ray.local_cluster import RayHead, ray_head  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(240)]


# Sleeps INPUT0 seconds, then answers with the pid of the replica that ran it.
WHOAMI_MODEL = """
import os, time
import numpy as np

class Model:
    def infer(self, inputs):
        time.sleep(float(inputs["INPUT0"].ravel()[0]))
        return {"PID": np.array([os.getpid()], dtype=np.int64)}
"""
WHOAMI_CONFIG = """
backend = "python"
instances = 2

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "PID"
datatype = "INT64"
shape = [1]

[ray]
{scaling}
"""
# Grows from 1 to 2 replicas as soon as a replica holds more than one request (Ray Serve
# warns about a look-back period shorter than its 10 s metrics interval).
AUTOSCALED = """min_replicas = 1
max_replicas = 2
target_ongoing_requests = 1
look_back_period_s = 11
upscale_delay_s = 0
downscale_delay_s = 600
"""
TWO_REPLICAS = "min_replicas = 2"


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ray") / "models"


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayHead]:
    # Read by the Serve controller and routers Ray starts: report ongoing requests every
    # half second, not every 10 s, so the autoscaler sees the load in time.
    fast_metrics = {
        "RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5",
        "RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5",
    }
    with ray_head(tmp_path_factory.mktemp("head"), extra_env=fast_metrics) as started:
        yield started


@pytest.fixture(scope="module")
def cluster(repository: Path, head: RayHead) -> Iterator[str]:
    """The application's HTTP address (host:port), deployed by ``conveyor ray deploy``."""
    models = RepoBuilder(repository)
    models.tiny()
    models.python("growing", WHOAMI_MODEL, WHOAMI_CONFIG.format(scaling=AUTOSCALED))
    models.python("steady", WHOAMI_MODEL, WHOAMI_CONFIG.format(scaling=TWO_REPLICAS))
    accumulate = NATIVE_CONFIG.format(instances=1, idle_us=5_000_000, queued=8)
    models.python("accumulate", NATIVE_MODEL, accumulate)
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "conveyor", "ray", "deploy", str(repository),
         "--http-port", str(port)],
        capture_output=True, text=True, timeout=180, env=head.env,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    with pytest.MonkeyPatch.context() as env:
        # This process as a driver: the cluster's token, and its loopback node address
        # (Ray would otherwise take the machine's address as this node's).
        env.setenv("RAY_AUTH_TOKEN", head.token)
        env.setenv("RAY_AUTH_MODE", "token")
        env.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)
        Config.initialize("")  # Ray reads the auth mode once; read it again
        ray.init(address=head.address, log_to_driver=False, configure_logging=False)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            ray.shutdown()
    Config.initialize("")  # token mode off again for the rest of this process


def whoami(client: http.InferenceServerClient, model: str, seconds: float = 0.0) -> int:
    given = http.InferInput("INPUT0", [1], "FP32")
    given.set_data_from_numpy(np.array([seconds], np.float32))
    return int(client.infer(model, [given]).as_numpy("PID")[0])


def replicas(deployment: str, state: str = "RUNNING") -> int:
    app = serve.status().applications[APP_NAME]
    return app.deployments[deployment].replica_states.get(state, 0)


def test_tritonclient_sees_the_v2_server(cluster: str) -> None:
    client = http.InferenceServerClient(cluster)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("tiny")
    metadata = client.get_model_metadata("tiny")  # read from the ONNX file by the replica
    assert metadata["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]}]
    assert [m["name"] for m in client.get_model_repository_index()] == [
        "accumulate",
        "growing",
        "steady",
        "tiny",
    ]
    data = np.arange(16, dtype=np.float32).reshape(1, 16)
    for binary in (True, False):
        given = http.InferInput("INPUT0", [1, 16], "FP32")
        given.set_data_from_numpy(data, binary_data=binary)
        result = client.infer("tiny", [given])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data + 1)
        assert result.get_response()["model_version"] == "1"
    stats = client.get_inference_statistics("tiny")["model_stats"][0]
    assert stats["inference_stats"]["success"]["count"] >= 2


def test_errors_keep_their_status(cluster: str) -> None:
    client = http.InferenceServerClient(cluster)
    given = http.InferInput("INPUT0", [1, 16], "FP32")
    given.set_data_from_numpy(np.ones((1, 16), np.float32))
    with pytest.raises(http.InferenceServerException) as missing:
        client.infer("absent", [given])
    assert missing.value.status() == "404"
    wrong = http.InferInput("INPUT0", [1, 3], "FP32")  # checked by the replica's engine
    wrong.set_data_from_numpy(np.ones((1, 3), np.float32))
    with pytest.raises(http.InferenceServerException) as refused:
        client.infer("tiny", [wrong])
    assert refused.value.status() == "400"
    assert "INPUT0" in refused.value.message()


def test_a_sequence_keeps_its_state_in_its_replica(cluster: str) -> None:
    client = http.InferenceServerClient(cluster)
    totals = []
    for index, value in enumerate((3, 4, 5)):
        given = http.InferInput("INPUT", [1], "INT32")
        given.set_data_from_numpy(np.array([value], np.int32))
        result = client.infer(
            "accumulate",
            [given],
            sequence_id=42,
            sequence_start=index == 0,
            sequence_end=index == 2,
        )
        totals.append(int(result.as_numpy("OUTPUT")[0]))
    assert totals == [3, 7, 12]


def test_scales_from_one_to_two_replicas_under_load(cluster: str) -> None:
    assert replicas("model-growing") == 1
    failures: list[BaseException] = []
    pids: set[int] = set()
    stop = threading.Event()

    def load() -> None:
        # Closed on the thread that made it: a gevent client left to the garbage collector
        # warns of its unclosed socket in whichever test collects it.
        client = http.InferenceServerClient(cluster)
        try:
            while not stop.is_set():
                try:
                    pids.add(whoami(client, "growing", 0.05))
                except BaseException as exc:
                    failures.append(exc)
                    return
        finally:
            client.close()

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_until(
            lambda: (replicas("model-growing") == 2 and len(pids) == 2) or failures,
            timeout=90,
            what=lambda: (
                f"2 replicas answering (running: {replicas('model-growing')}, "
                f"pids seen: {sorted(pids)})"
            ),
            interval=0.2,
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert failures == []
    assert len(pids) == 2


def test_requests_after_a_replica_is_killed_go_to_the_others(cluster: str) -> None:
    handle = serve.get_deployment_handle("model-steady", app_name=APP_NAME)
    pids: set[int] = set()
    wait_until(
        lambda: pids.add(handle.pid.remote().result(timeout_s=30)) or len(pids) == 2,
        timeout=60,
        what="both replicas of model-steady answering",
    )
    killed, survivor = sorted(pids)
    os.kill(killed, signal.SIGKILL)
    client = http.InferenceServerClient(cluster)
    # At once, before Ray Serve has noticed: a request routed to the dead replica is sent
    # again to a live one, so none fails.
    served_by = [whoami(client, "steady") for _ in range(20)]
    assert killed not in served_by
    assert survivor in served_by
    # Ray Serve replaces the dead replica: two run again, neither of them the killed one.
    wait_until(lambda: replicas("model-steady") == 2, timeout=90, what="a replacement replica")


def test_status_command_lists_the_deployments(cluster: str, head: RayHead) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "conveyor", "ray", "status", "--address", head.address],
        capture_output=True,
        text=True,
        timeout=120,
        env=head.env,
    )
    assert done.returncode == 0, done.stderr
    assert f"{APP_NAME}: RUNNING" in done.stdout
    for deployment in ("conveyor-ingress", "model-accumulate", "model-growing", "model-tiny"):
        assert deployment in done.stdout


def test_deploying_again_keeps_the_application_serving(
    cluster: str, repository: Path, head: RayHead
) -> None:
    """The same repository again, with ``--address``: Ray Serve keeps (or rolls) the
    replicas and the app serves on."""
    port = cluster.rpartition(":")[2]
    done = subprocess.run(
        [sys.executable, "-m", "conveyor", "ray", "deploy", str(repository),
         "--address", head.address, "--http-port", port],
        capture_output=True, text=True, timeout=180, env=head.env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"at http://127.0.0.1:{port}" in done.stdout
    wait_until(
        lambda: serve.status().applications[APP_NAME].status == "RUNNING",
        timeout=90,
        what="the application running again",
        interval=0.2,
    )
    client = http.InferenceServerClient(cluster)
    assert whoami(client, "steady") > 0
