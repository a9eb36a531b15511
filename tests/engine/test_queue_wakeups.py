"""A put notifies a taker only when one sleeps; none is ever left asleep with work queued.

Many threads put and take at once, every wait bounded: each request is taken exactly once,
and every submitted request is answered, with takers idle, busy, or forming batches.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from conveyor import Engine
from conveyor.engine.request import Request
from conveyor.engine.scheduler import BatchPolicy, RequestQueue
from conveyor.futures import InferFuture
from tests.models import RepoBuilder

PUTTERS = 8
PER_PUTTER = 300


def queued(index: int, key: tuple = ()) -> Request:
    return Request({"i": np.array([index])}, (), 0, None, InferFuture(), 0.0, 1, key)


@pytest.mark.parametrize(
    "policy",
    [None, BatchPolicy(max_batch_size=4, max_queue_delay_s=0.0005)],
    ids=["one by one", "batches"],
)
def test_every_request_put_by_many_threads_is_taken_once(policy):
    queue = RequestQueue("m", capacity=PUTTERS * PER_PUTTER)
    taken: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        while (work := queue.take(policy)) is not None:
            with lock:
                taken.extend(int(r.inputs["i"][0]) for r in work)

    def put(first: int) -> None:
        for i in range(first, first + PER_PUTTER):
            queue.put(queued(i))

    takers = [threading.Thread(target=take, daemon=True) for _ in range(3)]
    putters = [
        threading.Thread(target=put, args=(n * PER_PUTTER,), daemon=True) for n in range(PUTTERS)
    ]
    for thread in (*takers, *putters):
        thread.start()
    for thread in putters:
        thread.join(30)
    # Everything put is taken while the queue is still open (no close() to flush it out).
    deadline = threading.Event()
    for _ in range(300):
        with lock:
            if len(taken) == PUTTERS * PER_PUTTER:
                break
        deadline.wait(0.05)
    queue.close()
    for thread in takers:
        thread.join(10)
    assert not any(thread.is_alive() for thread in (*takers, *putters))
    assert sorted(taken) == list(range(PUTTERS * PER_PUTTER))


def test_a_put_wakes_a_sleeping_taker():
    queue = RequestQueue("m", capacity=4)
    got: list[list[Request] | None] = []
    taker = threading.Thread(target=lambda: got.append(queue.take(None)), daemon=True)
    taker.start()
    threading.Event().wait(0.2)  # time for the taker to fall asleep on the empty queue
    queue.put(queued(7))
    taker.join(10)
    assert not taker.is_alive()
    assert got and got[0] is not None and int(got[0][0].inputs["i"][0]) == 7


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    repo = RepoBuilder(tmp_path_factory.mktemp("wakeups"))
    repo.tiny()
    repo.batched()
    (repo.path / "tiny" / "config.toml").write_text(
        'backend = "onnxruntime"\ninstances = 2\nmax_queue_size = 4096\n'
    )
    with Engine.from_repository(repo.path) as engine:
        yield engine


@pytest.mark.parametrize("model", ["tiny", "batched"])
def test_many_threads_submitting_are_all_answered(engine, model):
    failures: list[BaseException] = []

    def submit_and_wait() -> None:
        try:
            for i in range(PER_PUTTER):
                x = np.full((1, 16), i, np.float32)
                out = engine.submit(model, {"INPUT0": x}).result(timeout=10)["OUTPUT0"]
                np.testing.assert_array_equal(out, x + 1)
        except BaseException as exc:  # reported below, with the thread's own failure
            failures.append(exc)

    threads = [threading.Thread(target=submit_and_wait, daemon=True) for _ in range(PUTTERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []


@pytest.mark.parametrize("model", ["tiny", "batched"])
def test_a_closed_loop_of_callbacks_is_answered_to_the_last(engine, model):
    """Answers submit the next request from the instance thread itself: the instances are
    busy, so most puts skip the notify, and the last requests must still be taken."""
    total, in_flight = 2000, 16
    lock = threading.Lock()
    done = threading.Event()
    state = {"sent": in_flight, "answered": 0, "failed": 0}
    x = {"INPUT0": np.ones((1, 16), np.float32)}

    def answered(future: InferFuture) -> None:
        with lock:
            state["answered"] += 1
            state["failed"] += future.exception() is not None
            more = state["sent"] < total
            state["sent"] += more
            if state["answered"] == total:
                done.set()
        if more:
            engine.submit(model, x).add_done_callback(answered)

    for _ in range(in_flight):
        engine.submit(model, x).add_done_callback(answered)
    assert done.wait(60), f"{state['answered']} of {total} answered"
    assert state["failed"] == 0
