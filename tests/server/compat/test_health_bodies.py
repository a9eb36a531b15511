"""KServe's Python SDK reads ``{"live": true}`` / ``{"ready": true}`` from the REST health
routes; not ready is the same 400 as before, with ``"ready": false`` and why. Triton's
clients read only the status, so they are unaffected (checked too)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from conveyor.testing import RunningServer, run_server
from tests.server.compat.models import WHY, build_repository
from tests.server.http.http_util import get_json


def test_live_and_ready_bodies(compat_server: RunningServer) -> None:
    url = compat_server.http_url
    assert get_json(url, "/v2/health/live") == (200, {"live": True})
    assert get_json(url, "/v2/health/ready") == (200, {"ready": True})
    assert get_json(url, "/v2/models/scores/ready") == (200, {"ready": True})
    assert get_json(url, "/v2/models/tiny/versions/1/ready") == (200, {"ready": True})


def test_a_model_not_ready_says_false_and_why(compat_server: RunningServer) -> None:
    status, body = get_json(compat_server.http_url, "/v2/models/broken/ready")
    assert status == 400
    assert body["ready"] is False and "'broken'" in body["error"]


def test_tritonclient_still_reads_the_status(client: Any, protocol: str) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("scores")
    assert not client.is_model_ready("broken")


def test_a_server_not_ready_says_false_and_why(tmp_path: Path) -> None:
    # Strict readiness and a model asked to load at start that fails: never ready.
    args = ["--model-control", "explicit", "--load-model", "broken", "--load-model", "tiny"]
    with run_server(build_repository(tmp_path), extra_args=args, wait=False) as server:
        deadline = time.monotonic() + 60
        while True:
            assert server.process.poll() is None, server.output()
            try:
                status, body = get_json(server.http_url, "/v2/health/ready")
            except OSError:
                status, body = 0, None
            if status == 400 and "failed to load" in body.get("error", ""):
                break
            assert time.monotonic() < deadline, (status, body)
            time.sleep(0.05)
        assert body["ready"] is False and WHY in body["error"]
        assert get_json(server.http_url, "/v2/health/live") == (200, {"live": True})
