"""The engine process dies: each front end sees its link close, fails what it was waiting
for with a clear error instead of hanging, and exits."""

from __future__ import annotations

import http.client
import json
import os
import signal
from pathlib import Path

import psutil
import pytest

from conveyor.testing import run_server
from tests.models import RepoBuilder
from tests.polling import wait_until
from tests.server.workers.workers_util import wait_front_ends

pytestmark = pytest.mark.workers


def test_front_ends_fail_their_requests_and_exit_when_the_engine_dies(tmp_path: Path) -> None:
    RepoBuilder(tmp_path).sleep_model("sleep", instances=1)
    with run_server(tmp_path, extra_args=["--workers", "2"]) as server:
        front_ends = [psutil.Process(pid) for pid in wait_front_ends(server, 2)]
        body = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [30]}]}
        waiting = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
        waiting.request("POST", "/v2/models/sleep/infer", json.dumps(body))
        wait_until(lambda: _accepted(front_ends, server.http_port), 20, "the request accepted")
        os.kill(server.process.pid, signal.SIGKILL)
        try:
            response = waiting.getresponse()
        except (ConnectionError, http.client.HTTPException):
            pass  # the front end closed the connection as it exited: also not a hang
        else:
            answer = json.loads(response.read())
            assert response.status == 503, answer
            assert "engine process is gone" in answer["error"]
        finally:
            waiting.close()
        wait_until(lambda: not any(_alive(p) for p in front_ends), 30, "the front ends exited")


def _accepted(front_ends: list[psutil.Process], port: int) -> bool:
    return any(
        c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port
        for process in front_ends
        for c in process.net_connections(kind="tcp")
    )


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
