"""``Engine``, ``Client("http://…")`` and ``Client("grpc://…")`` have the same shape.

Each test runs once per implementation, against the same repository: an in-process Engine,
and a real ``conveyor serve`` process reached over HTTP and over gRPC. ``submit`` returns a
future at once; ``as_completed`` yields in completion order; a queued request can be
cancelled and then never runs; higher priority runs first; a request whose timeout passes
while it is queued fails with DeadlineExceeded and never runs.

Nothing here measures absolute time: a run-logging model (tests/models.py) records which
requests ran, in order, and the implementation's own queue length says what is queued.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conveyor import Engine
from conveyor.client import Client
from conveyor.errors import DeadlineExceeded
from conveyor.futures import InferFuture, as_completed
from conveyor.testing import RunningServer, run_server
from tests.metrics import pending
from tests.models import RepoBuilder, RunLog
from tests.polling import wait_until


@dataclasses.dataclass
class Target:
    """One implementation of submit, and how many requests it has queued for a model."""

    submitter: Any  # Engine or a client: the point is that the tests cannot tell them apart
    queued: Callable[[str], int]

    def submit(self, model: str, inputs: dict[str, np.ndarray], **kwargs: Any) -> InferFuture:
        return self.submitter.submit(model, inputs, **kwargs)

    def wait_queued(self, model: str, count: int) -> None:
        wait_until(lambda: self.queued(model) == count, 10, f"{model} having {count} queued")


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = RepoBuilder(tmp_path_factory.mktemp("same-shape") / "models")
    builder.sleep_model("sleep", instances=2)
    builder.run_logging_model("slow", queue=8)  # one instance: a queue forms behind it
    return builder.path


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    with run_server(repository) as running:
        yield running


@pytest.fixture(scope="module", params=["engine", "http", "grpc"])
def target(request: pytest.FixtureRequest, repository: Path) -> Iterator[Target]:
    if request.param == "engine":
        with Engine.from_repository(repository) as engine:
            yield Target(engine, lambda model: engine.statistics(model)[0].pending)
        return
    server: RunningServer = request.getfixturevalue("server")
    url = server.http_url if request.param == "http" else server.grpc_url
    with Client(url) as client:
        yield Target(client, lambda model: pending(server, model))


@pytest.fixture
def log(repository: Path) -> RunLog:
    runs = RunLog(repository, "slow")
    runs.clear()
    return runs


def slow(seconds: float, tag: str) -> dict[str, np.ndarray]:
    return {"INPUT0": np.array([seconds], np.float32), "TAG": np.array([tag.encode()], object)}


def sleep(seconds: float) -> dict[str, np.ndarray]:
    return {"INPUT0": np.array([seconds], np.float32)}


def test_submit_returns_a_future_before_the_model_has_run(target: Target, log: RunLog) -> None:
    future = target.submit("slow", slow(0.5, "A"), request_id="r1")
    assert isinstance(future, InferFuture)
    assert future.request_id == "r1"
    assert not future.done()  # the model sleeps 0.5 s: submit did not wait for it
    assert future.result(timeout=10)["OUTPUT0"].tolist() == [b"A"]
    assert future.done() and future.exception() is None
    assert log.tags() == ["A"]


def test_as_completed_yields_the_fast_request_before_the_slow_one(target: Target) -> None:
    slow_one = target.submit("sleep", sleep(0.5), request_id="slow")
    fast_one = target.submit("sleep", sleep(0.0), request_id="fast")
    order = [f.request_id for f in as_completed([slow_one, fast_one], timeout=10)]
    assert order == ["fast", "slow"]
    assert fast_one.completion_seq < slow_one.completion_seq


def test_a_cancelled_queued_request_never_runs(target: Target, log: RunLog) -> None:
    first = target.submit("slow", slow(0.8, "A"))
    log.wait_for("A")
    second = target.submit("slow", slow(0, "B"))
    target.wait_queued("slow", 1)
    assert second.cancel()
    assert second.cancelled()
    first.result(timeout=10)
    target.submit("slow", slow(0, "C")).result(timeout=10)
    assert log.tags() == ["A", "C"]


def test_higher_priority_runs_first_on_a_one_instance_model(target: Target, log: RunLog) -> None:
    first = target.submit("slow", slow(1.0, "A"))
    log.wait_for("A")
    low = target.submit("slow", slow(0, "LOW"), priority=-1)  # after default requests
    target.wait_queued("slow", 1)
    default = target.submit("slow", slow(0, "DEFAULT"))
    target.wait_queued("slow", 2)  # both queued while A runs, LOW first
    for future in (first, low, default):
        future.result(timeout=10)
    assert log.tags() == ["A", "DEFAULT", "LOW"]


def test_a_timeout_that_passes_in_the_queue_is_deadline_exceeded(
    target: Target, log: RunLog
) -> None:
    first = target.submit("slow", slow(1.0, "A"))
    log.wait_for("A")
    late = target.submit("slow", slow(0, "B"), timeout=0.2)
    # The Engine (and so the HTTP front end) fails it when A frees the instance; the gRPC
    # front end already at the deadline. Either way it fails as DeadlineExceeded, unrun.
    with pytest.raises(DeadlineExceeded):
        late.result(timeout=10)
    first.result(timeout=10)
    target.submit("slow", slow(0, "C")).result(timeout=10)
    assert log.tags() == ["A", "C"]
