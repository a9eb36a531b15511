"""The MiniLM benchmark's load: N requests kept in flight, in-process and over HTTP.

Neither loop may become the thing measured:

- **in-process**: every answer's done callback submits the next request, so N requests stay
  in flight with no waiting thread per request. N threads each blocking on ``result()``
  spend the measuring process's GIL on wake-ups and hand-offs at every answer.
- **http**: ``tritonclient.http.aio`` with one coroutine per in-flight request. The
  gevent client's ``async_infer`` sleeps 10 ms after every send (``gevent.sleep(0.01)``,
  to let its greenlet start), which caps one client at about 100 requests/s whatever the
  concurrency: the served short texts seemed stuck near 90 sentences/s at c=1, 16 and 64
  while the server sat half idle and the encoder ran batches of one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from conveyor.futures import InferFuture

Tensors = Mapping[str, np.ndarray]


def in_flight_loop(
    submit: Callable[[int], InferFuture], concurrency: int, seconds: float, timeout: float = 600
) -> float:
    """Answers per second with ``concurrency`` requests in flight for ``seconds``: each
    answer's callback submits the next (``submit(turn)``), until the time is up and every
    slot has had at least one answer. Raises the first failed request's error."""
    lock = threading.Lock()
    finished = threading.Event()
    state = {"answers": 0, "live": concurrency}
    slot_answered = [False] * concurrency
    failures: list[BaseException] = []
    turn = iter(range(1 << 62))
    stop = time.perf_counter() + seconds

    def start(slot: int) -> None:
        with lock:
            index = next(turn)
        submit(index).add_done_callback(lambda future: answered(slot, future))

    def answered(slot: int, future: Any) -> None:
        error = future.exception()
        with lock:
            if error is not None:
                failures.append(error)
            else:
                state["answers"] += 1
            slot_answered[slot] = True
            going_on = not failures and (time.perf_counter() < stop or not all(slot_answered))
            if not going_on:
                state["live"] -= 1
                if state["live"] == 0:
                    finished.set()
                return
        start(slot)

    started = time.perf_counter()
    for slot in range(concurrency):
        start(slot)
    if not finished.wait(seconds + timeout):
        raise TimeoutError(f"requests still in flight {timeout} s after the run ended")
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return state["answers"] / elapsed


def http_in_flight(
    url: str, model: str, tensors: list[Tensors], concurrency: int, seconds: float
) -> float:
    """Requests per second over HTTP (binary tensors) with ``concurrency`` in flight, the
    ``tensors`` taken in turn; one asyncio client, one coroutine per in-flight request."""
    return asyncio.run(_http_in_flight(url, model, tensors, concurrency, seconds))


async def _http_in_flight(
    url: str, model: str, tensors: list[Tensors], concurrency: int, seconds: float
) -> float:
    import tritonclient.http.aio as aioclient

    requests = [_infer_inputs(aioclient, tensor) for tensor in tensors]
    turn = iter(range(1 << 62))
    client = aioclient.InferenceServerClient(url, conn_limit=concurrency)
    try:
        # A first round: every connection is open before the clock starts.
        await asyncio.gather(*(client.infer(model, requests[0]) for _ in range(concurrency)))
        stop = time.perf_counter() + seconds

        async def worker() -> int:
            answers = 0
            while answers == 0 or time.perf_counter() < stop:
                await client.infer(model, requests[next(turn) % len(requests)])
                answers += 1
            return answers

        started = time.perf_counter()
        counts = await asyncio.gather(*(worker() for _ in range(concurrency)))
        return sum(counts) / (time.perf_counter() - started)
    finally:
        await client.close()


def _infer_inputs(aioclient: Any, tensor: Tensors) -> list[Any]:
    from tritonclient.utils import np_to_triton_dtype

    inputs = []
    for name, array in tensor.items():
        one = aioclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        one.set_data_from_numpy(array, binary_data=True)
        inputs.append(one)
    return inputs
