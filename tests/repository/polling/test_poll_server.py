"""--model-control poll: a real server follows its repository while it serves steady load.

Added models load, changed ones reload (requests in flight finish on the old version, and
no request to a model that stays ever fails), removed ones unload, a new version folder is
served by the version policy, a broken change keeps the old version serving with the reason
in the index, and load/unload requests are refused as Triton refuses them.
"""

from __future__ import annotations

import concurrent.futures
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from conveyor.engine.engine import POLLING_REFUSAL
from conveyor.testing import RunningServer
from tests.polling import wait_until
from tests.repository.polling.models import WIDTH, write_add_model, write_slow_model

# Two scans must agree before a change is acted on, then the model loads on a loaded machine.
SETTLE_TIMEOUT_S = 30.0


def answer(client: Any, model: str, version: str = "") -> float:
    """What ``model`` adds to zeros (its constant)."""
    import tritonclient.http as httpclient

    x = httpclient.InferInput("INPUT0", [1, WIDTH], "FP32")
    x.set_data_from_numpy(np.zeros((1, WIDTH), np.float32))
    result = client.infer(model, [x], model_version=version)
    return float(result.as_numpy("OUTPUT0")[0, 0])


def answer_or_error(client: Any, model: str) -> float | str:
    try:
        return answer(client, model)
    except InferenceServerException as exc:
        return str(exc.message())


def index_of(client: Any) -> dict[str, list[dict[str, Any]]]:
    entries: dict[str, list[dict[str, Any]]] = {}
    for entry in client.get_model_repository_index():
        entries.setdefault(entry["name"], []).append(entry)
    return entries


class SteadyLoad:
    """A thread sending requests to the models that stay, in a bounded loop; it records
    every answer that is not one the model may give at that point."""

    def __init__(self, server: RunningServer, allowed: dict[str, set[float]]) -> None:
        self.server = server
        self.allowed = allowed
        self.failures: list[str] = []
        self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-load")

    def _run(self) -> None:
        import tritonclient.http as httpclient

        client = httpclient.InferenceServerClient(self.server.http_url.removeprefix("http://"))
        try:
            deadline = time.monotonic() + 180  # bounded even if the test never stops it
            while not self._stop.is_set() and time.monotonic() < deadline:
                for model, allowed in self.allowed.items():
                    try:
                        got = answer(client, model)
                    except InferenceServerException as exc:
                        self.failures.append(f"{model}: {exc.message()}")
                        continue
                    if got not in allowed:
                        self.failures.append(f"{model}: answered {got}, expected {allowed}")
                    self.answered += 1
        finally:
            client.close()

    def __enter__(self) -> SteadyLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.fixture(scope="module")
def load(server: RunningServer) -> Iterator[SteadyLoad]:
    # changing answers +10, then +20 once rewritten; the broken change must not alter that.
    with SteadyLoad(server, {"steady": {1.0}, "changing": {10.0, 20.0}}) as running:
        yield running


def test_a_model_added_to_the_repository_loads(
    load: SteadyLoad, repository: Path, http_client: Any
) -> None:
    assert not http_client.is_model_ready("newcomer")
    write_add_model(repository / "newcomer", 7)
    wait_until(lambda: answer_or_error(http_client, "newcomer") == 7.0, SETTLE_TIMEOUT_S,
               "newcomer served")  # fmt: skip


def test_a_changed_model_reloads_with_no_failed_request(
    load: SteadyLoad, repository: Path, http_client: Any
) -> None:
    assert answer(http_client, "changing") == 10.0
    write_add_model(repository / "changing", 20)
    wait_until(lambda: answer(http_client, "changing") == 20.0, SETTLE_TIMEOUT_S,
               "the new constant")  # fmt: skip
    assert load.answered > 0
    assert load.failures == []


def test_a_removed_model_answers_triton_unknown_model(
    load: SteadyLoad, repository: Path, http_client: Any, grpc_client: Any
) -> None:
    assert answer(http_client, "doomed") == 1.0
    shutil.rmtree(repository / "doomed")
    # Not ready as soon as its unloading starts; gone from the index once it has ended (and
    # until then it answers that it is UNLOADING, not that it is unknown).
    wait_until(lambda: "doomed" not in index_of(http_client), SETTLE_TIMEOUT_S,
               "doomed unloaded")  # fmt: skip
    assert not http_client.is_model_ready("doomed")
    message = str(answer_or_error(http_client, "doomed"))
    assert message.startswith("Request for unknown model: 'doomed' is not found"), message
    assert not grpc_client.is_model_ready("doomed")
    assert "doomed" not in index_of(http_client)
    assert load.failures == []


def test_a_new_version_folder_follows_the_version_policy(
    load: SteadyLoad, repository: Path, http_client: Any
) -> None:
    assert answer(http_client, "versioned") == 100.0
    write_add_model(repository / "versioned", 200, version=2)
    # The default policy serves the latest version only: 2 replaces 1.
    wait_until(lambda: answer(http_client, "versioned") == 200.0, SETTLE_TIMEOUT_S,
               "version 2 served")  # fmt: skip
    assert [e["version"] for e in index_of(http_client)["versioned"]] == ["2"]
    assert answer(http_client, "versioned", version="2") == 200.0
    with pytest.raises(InferenceServerException, match="version 1 is not found"):
        answer(http_client, "versioned", version="1")
    assert load.failures == []


def test_a_broken_change_keeps_the_old_version_serving_with_the_reason(
    load: SteadyLoad, repository: Path, http_client: Any
) -> None:
    wait_until(lambda: answer(http_client, "changing") == 20.0, SETTLE_TIMEOUT_S,
               "changing at +20")  # fmt: skip
    (repository / "changing" / "config.toml").write_text('backend = "no-such-backend"\n')

    def reason() -> str:
        return str(index_of(http_client)["changing"][0].get("reason", ""))

    wait_until(lambda: "reload failed" in reason(), SETTLE_TIMEOUT_S, reason)
    entry = index_of(http_client)["changing"][0]
    assert entry["state"] == "READY"
    assert "no-such-backend" in entry["reason"]
    assert answer(http_client, "changing") == 20.0
    assert http_client.is_server_ready()  # the old version serves: nothing failed to load
    assert load.failures == []


def test_a_request_in_flight_finishes_on_the_version_it_started_on(
    repository: Path, signals: Path, http_client: Any, server: RunningServer
) -> None:
    import tritonclient.http as httpclient

    def slow(hold: bool) -> float:
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            x = httpclient.InferInput("INPUT0", [1], "FP32")
            x.set_data_from_numpy(np.array([1.0 if hold else 0.0], np.float32))
            return float(client.infer("slow", [x]).as_numpy("OUTPUT0")[0])
        finally:
            client.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(slow, True)
        try:
            wait_until((signals / "started").exists, 30, "the held request started")
            write_slow_model(repository / "slow", 2, signals)
            # New requests reach the new version while the old one still holds a request.
            wait_until(lambda: slow(False) == 2.0, SETTLE_TIMEOUT_S, "the new VALUE")
            assert not in_flight.done()
        finally:
            (signals / "release").touch()
        assert in_flight.result(timeout=30) == 1.0  # answered by the version it started on


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_load_and_unload_requests_are_refused(
    protocol: str, http_client: Any, grpc_client: Any
) -> None:
    client = http_client if protocol == "http" else grpc_client
    for call in (lambda: client.load_model("steady"), lambda: client.unload_model("steady")):
        with pytest.raises(InferenceServerException) as caught:
            call()
        assert str(caught.value.message()).startswith(POLLING_REFUSAL)
        # Triton answers UNAVAILABLE: 503 over HTTP.
        assert caught.value.status() in ("503", "StatusCode.UNAVAILABLE")
    assert client.is_model_ready("steady")
