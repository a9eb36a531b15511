"""``--workers 2`` over time: a front end that dies is replaced and only its own requests
fail; SIGTERM drains every front end, then the engine."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import signal
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families

from conveyor.client import Client
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder
from tests.polling import wait_until
from tests.server.workers.workers_util import (
    front_end_pids,
    http_client,
    paused,
    tiny_input,
    wait_front_ends,
)

pytestmark = pytest.mark.workers


def admitted(server: RunningServer, model: str = "sleep") -> float:
    """Requests the engine holds or has answered (queued + executed)."""
    with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
        text = response.read().decode()
    values = {
        family.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("model") == model
    }
    return values["nv_inference_pending_request_count"] + values["nv_inference_count"]


def sleep_request(server: RunningServer, seconds: float) -> Any:
    """One infer request on a new connection, sent at once; returns a call that reads the
    answer (http.client, which never retries: tritonclient's pool would resend it)."""
    connection = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
    body = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [seconds]}]}
    connection.request("POST", "/v2/models/sleep/infer", json.dumps(body))

    def answer() -> Any:
        try:
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    return answer


def test_a_killed_front_end_is_replaced_and_only_its_requests_fail(tmp_path: Path) -> None:
    builder = RepoBuilder(tmp_path)
    builder.sleep_model("sleep", instances=2)
    builder.tiny()
    with (
        run_server(tmp_path, extra_args=["--workers", "2"]) as server,
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        doomed, survivor = wait_front_ends(server, 2)
        calls = {}
        for taker, other in ((doomed, survivor), (survivor, doomed)):
            with paused(other):  # the request's connection goes to ``taker``
                calls[taker] = pool.submit(sleep_request(server, 3.0))
                wait_until(lambda t=taker: _connected(t, server), 20, "the connection accepted")
        os.kill(doomed, signal.SIGKILL)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            calls[doomed].result(30)  # its client sees the connection drop
        # The other front end's request is answered.
        status, answer = calls[survivor].result(30)
        assert status == 200 and answer["outputs"][0]["data"] == [3.0]
        wait_until(
            lambda: len(front_end_pids(server)) == 2 and doomed not in front_end_pids(server),
            30,
            "a new front end",
        )
        for _ in range(4):
            http_client(server).infer("tiny", [tiny_input(httpclient)])
        assert "starting another" in server.output()


def test_sigterm_drains_every_front_end(tmp_path: Path) -> None:
    RepoBuilder(tmp_path).sleep_model("sleep", instances=2)
    with run_server(tmp_path, extra_args=["--workers", "2"]) as server:
        pids = wait_front_ends(server, 2)
        with Client(server.http_url) as client:
            futures = [
                client.submit("sleep", {"INPUT0": np.array([0.3], np.float32)}, request_id=str(i))
                for i in range(12)
            ]
            wait_until(lambda: admitted(server) >= 10, 20, "12 admitted")
            server.process.send_signal(signal.SIGTERM)
            results = [f.result(30) for f in futures]  # every one answered, none lost
        assert [r["OUTPUT0"][0] for r in results] == [np.float32(0.3)] * 12
        assert server.process.wait(30) == 0
        assert not [pid for pid in pids if psutil.pid_exists(pid) and _alive(pid)]


def _connected(pid: int, server: RunningServer) -> bool:
    """Whether front end ``pid`` has accepted an HTTP connection."""
    return any(
        c.status == psutil.CONN_ESTABLISHED and c.laddr.port == server.http_port
        for c in psutil.Process(pid).net_connections(kind="tcp")
    )


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
