"""The MiniLM benchmark's loads keep N requests in flight at once, in-process and over HTTP.

The model below batches up to ``N`` requests and waits a whole second for a batch to fill:
a load that keeps N in flight runs full batches back to back, one with fewer in flight runs
partial batches a second apart. Only the last round, cut by the end of the run, may be
partial.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from benchmarks.minilm_load import http_in_flight, in_flight_loop
from conveyor import Engine
from conveyor.testing import run_server
from tests.models import RepoBuilder

N = 8

ECHO = """
class Model:
    def infer(self, inputs):
        return {"OUTPUT": inputs["INPUT"].copy()}
"""

FULL_BATCHES_ONLY = f"""
backend = "python"
max_batch_size = {N}
instances = 1

[dynamic_batching]
max_queue_delay_us = 1000000

[[inputs]]
name = "INPUT"
datatype = "INT64"
shape = [1]

[[outputs]]
name = "OUTPUT"
datatype = "INT64"
shape = [1]
"""

FAILING = """
class Model:
    def infer(self, inputs):
        raise ValueError("this model always fails")
"""

ONE = {"INPUT": np.array([[1]], dtype=np.int64)}


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    builder = RepoBuilder(tmp_path_factory.mktemp("in_flight"))
    builder.python("full_batches", ECHO, FULL_BATCHES_ONLY)
    builder.python("failing", FAILING, FULL_BATCHES_ONLY.replace(f"= {N}\n", "= 1\n", 1))
    yield builder.path


def assert_full_batches(executions: dict[int, int]) -> None:
    """Executions by batch size: several full ones, at most one partial (the last round)."""
    assert executions.get(N, 0) >= 3, executions
    assert sum(count for size, count in executions.items() if size != N) <= 1, executions


def test_callbacks_keep_n_requests_in_flight(repository: Path) -> None:
    with Engine.from_repository(repository) as engine:
        rate = in_flight_loop(
            lambda turn: engine.submit("full_batches", ONE), N, seconds=0.5, timeout=60
        )
        (stats,) = engine.statistics("full_batches")
    assert rate > 0
    assert_full_batches({s.batch_size: s.compute_infer.count for s in stats.batch_stats})


def test_a_failed_request_ends_the_loop_with_its_error(repository: Path) -> None:
    with Engine.from_repository(repository) as engine, pytest.raises(Exception, match="fails"):
        in_flight_loop(lambda turn: engine.submit("failing", ONE), 2, seconds=5, timeout=60)


def test_http_load_keeps_n_requests_in_flight(repository: Path) -> None:
    with run_server(repository) as server:
        url = server.http_url.removeprefix("http://")
        rate = http_in_flight(url, "full_batches", [ONE], N, seconds=0.5)
        with urllib.request.urlopen(f"{server.http_url}/v2/models/full_batches/stats") as answer:
            (stats,) = json.load(answer)["model_stats"]
    assert rate > 0
    assert_full_batches(
        {s["batch_size"]: s["compute_infer"]["count"] for s in stats["batch_stats"]}
    )
