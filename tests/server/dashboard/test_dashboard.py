"""The dashboard in a real browser against a real server under load."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder
from tests.polling import wait_until
from tests.server.dashboard.browser import chromium, console_errors

NONE = "\N{EN DASH}"  # what the page shows for a figure it does not have yet
ARTIFACTS = Path(__file__).parent / "artifacts"
LOAD_LIMIT_S = 60.0  # the load thread stops by itself even if a test forgets to


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    repo = RepoBuilder(tmp_path_factory.mktemp("repo"), instance_kind="process")
    repo.tiny()
    repo.batched()
    repo.failing_model()  # python, process instances: workers and recent errors on the page
    with run_server(repo.path) as running:
        yield running


class Load:
    """Requests from a background thread until stopped (or ``LOAD_LIMIT_S``)."""

    def __init__(self, server: RunningServer) -> None:
        self._url = server.http_url.removeprefix("http://")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        client = httpclient.InferenceServerClient(self._url)
        data = np.ones((1, 16), np.float32)
        tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
        tensor.set_data_from_numpy(data)
        failing = httpclient.InferInput("INPUT0", [4], "FP32")
        failing.set_data_from_numpy(np.ones(4, np.float32))
        deadline = time.monotonic() + LOAD_LIMIT_S
        sent = 0
        while not self._stop.is_set() and time.monotonic() < deadline:
            client.infer("tiny", [tensor])
            client.infer("batched", [tensor])
            sent += 1
            if sent % 50 == 0:
                with contextlib.suppress(Exception):  # it always fails: the page shows it
                    client.infer("broken", [failing])
        client.close()


def _stats(server: RunningServer, model: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{server.http_url}/v2/models/{model}/stats") as reply:
        stats = json.load(reply)["model_stats"][0]["inference_stats"]
    return {"success": stats["success"]["count"], "fail": stats["fail"]["count"]}


# Read in the page in one script: the page redraws every second, so an element handle
# kept across calls would go stale.
_READ_FIELD = """
const [model, field] = arguments;
const node = document.querySelector(`[data-model="${model}"] [data-field="${field}"]`);
return node ? node.textContent : "";
"""


def _shown(driver, model: str, field: str) -> str:  # type: ignore[no-untyped-def]
    return str(driver.execute_script(_READ_FIELD, model, field)).strip()


def _ticks(driver) -> int:  # type: ignore[no-untyped-def]
    return int(driver.execute_script("return document.getElementById('updated').dataset.ticks"))


def _screenshot(driver, name: str) -> Path:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    print(f"dashboard screenshot: {path}")
    return path


def _dashboard_url(server: RunningServer) -> str:
    return f"http://{server.host}:{server.metrics_port}/"


@pytest.mark.slow
def test_numbers_follow_the_load_and_match_the_statistics(server: RunningServer) -> None:
    with chromium(1280, 800) as driver, Load(server) as load:
        driver.get(_dashboard_url(server))
        wait_until(lambda: _shown(driver, "tiny", "success") not in ("", "0"), 20, "tiny served")
        first = int(_shown(driver, "tiny", "success"))
        # Live: the count grows as requests arrive, with no reload.
        wait_until(
            lambda: int(_shown(driver, "tiny", "success") or 0) > first, 10, "the count to grow"
        )
        wait_until(lambda: _shown(driver, "tiny", "requests_per_s") not in ("", NONE, "0.0"), 10,
                   "a request rate")  # fmt: skip
        wait_until(lambda: _shown(driver, "tiny", "p99") not in ("", NONE), 10, "a p99")
        wait_until(lambda: _shown(driver, "broken", "fail") not in ("", "0"), 20, "a failure")
        _screenshot(driver, "dashboard-1280x800.png")
        load.stop()
        # At rest, the page's totals are the statistics endpoint's, model by model.
        for model in ("tiny", "batched", "broken"):
            expected = _stats(server, model)

            def agrees(model: str = model, expected: dict[str, int] = expected) -> bool:
                return all(_shown(driver, model, k) == str(v) for k, v in expected.items())

            def seen(model: str = model, expected: dict[str, int] = expected) -> str:
                shown = f"{_shown(driver, model, 'success')}/{_shown(driver, model, 'fail')}"
                return f"{model}: the page shows {shown} ok/failed, statistics say {expected}"

            wait_until(agrees, 10, seen)
        page = str(driver.execute_script("return document.body.innerText"))
        assert "this model always fails" in page  # recent errors, with their message
        assert "pid " in page  # the process instances' workers
        assert "READY" in page
        lines = driver.execute_script("return document.querySelectorAll('#chart polyline').length")
        assert lines, "the chart drew no line"
        assert console_errors(driver) == []


@pytest.mark.slow
def test_readable_on_a_phone_with_no_console_errors(server: RunningServer) -> None:
    with chromium(390, 844) as driver, Load(server):
        driver.get(_dashboard_url(server))
        wait_until(lambda: _ticks(driver) >= 3, 20, "three updates")
        wait_until(lambda: _shown(driver, "tiny", "requests_per_s") not in ("", NONE), 10, "a rate")
        width = driver.execute_script("return document.documentElement.scrollWidth")
        viewport = driver.execute_script("return window.innerWidth")
        assert width <= viewport, f"the page scrolls sideways: {width} px in {viewport} px"
        _screenshot(driver, "dashboard-390x844.png")
        assert console_errors(driver) == []


def test_state_is_shared_not_rebuilt_per_request(server: RunningServer) -> None:
    # Two reads within the same second get the very same snapshot.
    url = f"http://{server.host}:{server.metrics_port}/dashboard/state"
    for _ in range(5):
        with urllib.request.urlopen(url) as a, urllib.request.urlopen(url) as b:
            first, second = a.read(), b.read()
        if first == second:
            return
    pytest.fail("two reads a moment apart never shared a snapshot")
