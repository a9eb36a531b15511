"""``dynamic_batching.max_padded_elements``: a ragged batch is bounded by its padded size
(rows x the longest request's row), so long texts run a few at a time and short ones still
batch by dozens."""

from __future__ import annotations

import textwrap
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.http as httpclient

from conveyor.engine.request import Request
from conveyor.engine.scheduler import BatchPolicy, RequestQueue
from conveyor.errors import RepositoryError
from conveyor.futures import InferFuture
from conveyor.repository.config import parse_config
from conveyor.testing import RunningServer, run_server
from tests.examples.minilm.ragged_model import RAGGED_CONFIG, RAGGED_MODEL
from tests.models import RepoBuilder

# The most rows that still batch: 8 elements, padded.
CAPPED_CONFIG = RAGGED_CONFIG.replace(
    "max_queue_delay_us = 30000000", "max_queue_delay_us = 30000000\nmax_padded_elements = 8"
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ragged(clock: FakeClock, width: int, rows: int = 1) -> Request:
    return Request(
        inputs={"IDS": np.ones((rows, width), np.int64)},
        outputs=("OUT",),
        priority=0,
        deadline=None,
        future=InferFuture(),
        enqueued=clock(),
        batch_size=rows,
        batch_key=(("IDS", 2),),
    )


def take(queue: RequestQueue, cap: int) -> list[Request] | None:
    """The next batch, with an hour's delay: a batch that leaves at once left because the
    bound made it full. One that waits fails the test after 30 s instead."""
    policy = BatchPolicy(16, 3600.0, max_padded_elements=cap, ragged=("IDS",))
    with ThreadPoolExecutor(1) as pool:
        batch = pool.submit(queue.take, policy)
        try:
            return batch.result(timeout=30)
        except TimeoutError:
            queue.close()  # wakes the taker, so the pool can shut down
            raise AssertionError("the batch waited for its delay instead of leaving") from None


def test_a_batch_stops_at_the_padded_bound_and_leaves_at_once() -> None:
    clock = FakeClock()
    queue = RequestQueue("m", 16, clock=clock)
    requests = [ragged(clock, 5) for _ in range(4)]
    for r in requests:
        queue.put(r)
    assert take(queue, 16) == requests[:3]  # 3 x 5 = 15; a fourth makes 20
    assert len(queue) == 1


def test_a_request_that_would_widen_past_the_bound_waits_for_the_next_batch() -> None:
    clock = FakeClock()
    queue = RequestQueue("m", 16, clock=clock)
    short, long, short2, short3 = (ragged(clock, w) for w in (4, 10, 4, 4))
    for r in (short, long, short2, short3):
        queue.put(r)
    assert take(queue, 12) == [short, short2, short3]  # 2 x 10 would be 20
    assert take(queue, 12) == [long]  # first in line now, and alone


def test_a_request_larger_than_the_bound_runs_alone() -> None:
    clock = FakeClock()
    queue = RequestQueue("m", 16, clock=clock)
    big, small = ragged(clock, 4, rows=10), ragged(clock, 1)
    queue.put(big)
    queue.put(small)
    assert take(queue, 12) == [big]
    assert take(queue, 1) == [small]  # 1 x 1 is full at a bound of 1


def test_the_bound_is_checked_in_config_toml() -> None:
    config = textwrap.dedent(CAPPED_CONFIG)
    parsed = parse_config("ragged", tomllib.loads(config))
    assert parsed.dynamic_batching is not None
    assert parsed.dynamic_batching.max_padded_elements == 8
    with pytest.raises(RepositoryError, match="max_padded_elements must be an integer >= 0"):
        parse_config("ragged", tomllib.loads(config.replace("= 8", "= -1")))
    with pytest.raises(RepositoryError, match="declare allow_ragged_batch = true"):
        parse_config("ragged", tomllib.loads(config.replace("allow_ragged_batch = true", "")))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    builder = RepoBuilder(tmp_path_factory.mktemp("capped"))
    builder.python("ragged", RAGGED_MODEL, CAPPED_CONFIG)
    with run_server(builder.path) as running:
        yield running


def test_served_batches_keep_under_the_bound(server: RunningServer) -> None:
    client = httpclient.InferenceServerClient(
        server.http_url.removeprefix("http://"), concurrency=3
    )
    # In any arrival order: the 1 x 3 and the 1 x 4 fill 2 x 4 = 8 (full, they leave at
    # once); the 2 x 7 is 14 padded, past the bound with any company, so it runs alone.
    requests = [
        np.arange(1, 4, dtype=np.int64).reshape(1, 3),
        np.full((1, 4), 2, dtype=np.int64),
        np.arange(1, 15, dtype=np.int64).reshape(2, 7),
    ]
    try:
        handles = []
        for values in requests:
            tensor = httpclient.InferInput("VALUES", list(values.shape), "INT64")
            tensor.set_data_from_numpy(values)
            handles.append(client.async_infer("ragged", [tensor]))
        results = [handle.get_result(timeout=60) for handle in handles]
    finally:
        client.close()
    executions = [int(r.as_numpy("EXECUTION")[0, 0]) for r in results]
    assert executions[0] == executions[1] != executions[2]
    widths = [set(r.as_numpy("WIDTH").ravel().tolist()) for r in results]
    assert widths == [{4}, {4}, {7}]
    for values, result in zip(requests, results, strict=True):
        np.testing.assert_array_equal(result.as_numpy("SUM"), values.sum(axis=1, keepdims=True))
