"""Submission returns at once; results come back in the order they complete."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

import conveyor
from conveyor import Engine
from tests.models import INSTANCE_KINDS, both_kinds
from tests.polling import wait_until


def seconds(value: float) -> dict[str, np.ndarray]:
    return {"INPUT0": np.array([value], np.float32)}


@pytest.fixture(params=INSTANCE_KINDS)
def sleepy(repo, request):
    repo.instance_kind = request.param
    repo.sleep_model(instances=4)
    with Engine.from_repository(repo.path) as engine:
        yield engine


def test_submit_returns_before_the_model_runs(sleepy):
    started = time.monotonic()
    future = sleepy.submit("sleep", seconds(0.5))
    submit_took = time.monotonic() - started
    assert not future.done()
    out = future.result(timeout=10)
    assert future.done()
    assert future.exception() is None
    assert out["OUTPUT0"].tolist() == [0.5]
    start, end = out["OUTPUT1"]
    assert end - start >= 0.45
    assert submit_took < (end - start) / 2  # submit took a fraction of the model's own run


def test_submit_never_runs_on_the_callers_thread(repo):
    repo.python(
        "whoami",
        """
        import threading
        import numpy as np

        class Model:
            def infer(self, inputs):
                return {"OUTPUT0": np.array([threading.get_ident()], dtype=np.int64)}
        """,
        """
        backend = "python"
        [[inputs]]
        name = "INPUT0"
        datatype = "INT64"
        shape = [1]
        [[outputs]]
        name = "OUTPUT0"
        datatype = "INT64"
        shape = [1]
        """,
    )
    with Engine.from_repository(repo.path) as engine:
        out = engine.submit("whoami", {"INPUT0": np.zeros(1, np.int64)}).result(timeout=10)
    assert out["OUTPUT0"][0] != threading.get_ident()


def test_as_completed_yields_in_completion_order(sleepy):
    durations = [0.8, 0.05, 0.4, 0.2]
    futures = [sleepy.submit("sleep", seconds(d)) for d in durations]
    order = [f.result()["OUTPUT0"][0] for f in conveyor.as_completed(futures, timeout=10)]
    assert order == pytest.approx(sorted(durations))


def test_as_completed_orders_futures_that_completed_before_the_call(sleepy):
    durations = [0.3, 0.05, 0.15]
    futures = [sleepy.submit("sleep", seconds(d)) for d in durations]
    for f in futures:
        f.result(timeout=10)
    order = [f.result()["OUTPUT0"][0] for f in conveyor.as_completed(futures)]
    assert order == pytest.approx(sorted(durations))


def test_as_completed_times_out(sleepy):
    futures = [sleepy.submit("sleep", seconds(1.0))]
    with pytest.raises(TimeoutError):
        list(conveyor.as_completed(futures, timeout=0.1))


def test_async_as_completed_and_await(sleepy):
    async def main() -> tuple[list[float], float]:
        futures = [sleepy.submit("sleep", seconds(d)) for d in (0.6, 0.05, 0.3)]
        order = [
            float(f.result()["OUTPUT0"][0])
            async for f in conveyor.as_completed_async(futures, timeout=10)
        ]
        direct = await sleepy.infer("sleep", seconds(0.01))
        return order, float(direct["OUTPUT0"][0])

    order, direct = asyncio.run(main())
    assert order == pytest.approx([0.05, 0.3, 0.6])
    assert direct == pytest.approx(0.01)


def test_awaiting_does_not_block_the_event_loop(sleepy):
    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        await sleepy.infer("sleep", seconds(0.4))
        task.cancel()
        return ticks

    # A blocked loop would tick once or twice; a free one ~40 times in 0.4 s.
    assert asyncio.run(main()) >= 10


def test_done_callback_is_called_once_on_completion(sleepy):
    calls: list[conveyor.InferFuture] = []
    done = threading.Event()

    def callback(future: conveyor.InferFuture) -> None:
        calls.append(future)
        done.set()

    future = sleepy.submit("sleep", seconds(0.1))
    future.add_done_callback(callback)
    assert done.wait(10)
    time.sleep(0.05)
    assert calls == [future]
    assert calls[0].result()["OUTPUT0"][0] == pytest.approx(0.1)


@both_kinds
def test_cancel_only_while_queued_and_a_cancelled_request_never_runs(repo):
    repo.sleep_model(instances=1)
    with Engine.from_repository(repo.path) as engine:
        running = engine.submit("sleep", seconds(0.4))
        wait_until(lambda: engine.statistics("sleep")[0].pending == 0, what="running picked up")
        queued = engine.submit("sleep", seconds(0.01))
        assert queued.cancel() is True
        assert queued.cancelled()
        assert running.cancel() is False
        running.result(timeout=10)
        with pytest.raises(Exception) as info:
            queued.result(timeout=1)
        assert type(info.value).__name__ == "CancelledError"
        engine.submit("sleep", seconds(0.01)).result(timeout=10)
        stats = engine.statistics("sleep")[0]
    assert stats.execution_count == 2  # the cancelled request never ran
