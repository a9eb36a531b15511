"""The future every submission returns, and completion-order iteration over many of them.

An :class:`InferFuture` is a :class:`concurrent.futures.Future` (``done()`` is seed 000's
"can_read"), that can also be awaited from any asyncio loop without blocking a thread.
The engine and the clients both hand these out, so code moves between them unchanged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import queue
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from conveyor.wakeups import mailbox

Outputs = dict[str, np.ndarray]
# A response parameter's value, as Triton's responses carry them (its backends set bool,
# int and str; the front ends send them as JSON values and typed gRPC parameters).
ParameterValue = bool | int | str


class ParameterizedOutputs(dict[str, np.ndarray]):
    """A response's outputs together with the parameters the model set on the response
    (a Triton model's ``InferenceResponse(..., parameters=...)``).

    A dict of outputs like any other, so every reader of outputs takes it unchanged; the
    front ends read ``parameters`` (:func:`response_parameters`) into the response."""

    def __init__(self, outputs: Mapping[str, np.ndarray], parameters: Mapping[str, ParameterValue]):
        super().__init__(outputs)
        self.parameters: dict[str, ParameterValue] = dict(parameters)


def response_parameters(outputs: Mapping[str, np.ndarray]) -> Mapping[str, ParameterValue]:
    """The parameters a model set on the response holding ``outputs`` (none: empty)."""
    return outputs.parameters if isinstance(outputs, ParameterizedOutputs) else {}


def with_parameters(
    outputs: dict[str, np.ndarray], parameters: Mapping[str, ParameterValue]
) -> dict[str, np.ndarray]:
    """``outputs`` carrying ``parameters`` (``outputs`` itself when there are none)."""
    return ParameterizedOutputs(outputs, parameters) if parameters else outputs


# Stamped on each future as it completes, so iteration can be strictly in completion order
# even for futures that had already completed before anyone asked.
_completion_order = itertools.count()
# concurrent.futures' states in which a future is done() (cancelled, or answered).
_SETTLED = frozenset({"CANCELLED", "CANCELLED_AND_NOTIFIED", "FINISHED"})


class RequestTimeline:
    """When a traced request was queued and computed, in ``time.perf_counter_ns()``.

    The engine fills it from the same clock readings its statistics come from, before the
    future completes, so whoever awaits the future reads it whole. ``batch_size``: the
    items of the execution the request ran in (with any requests batched with it).
    ``batch_start``: when the dynamic batcher took it into a batch being formed (0: the
    model does not batch dynamically). ``responses``: when each response of a decoupled
    model was sent. ``steps``: an ensemble's step requests, each with its own timeline.
    """

    __slots__ = (
        "batch_size",
        "batch_start",
        "compute_end",
        "compute_input_end",
        "compute_output_start",
        "compute_start",
        "queue_start",
        "responses",
        "steps",
    )

    def __init__(self) -> None:
        self.queue_start = 0
        self.batch_start = 0
        self.compute_start = 0
        self.compute_input_end = 0
        self.compute_output_start = 0
        self.compute_end = 0
        self.batch_size = 0
        self.responses: list[int] = []
        self.steps: list[StepTimeline] = []

    @property
    def computed(self) -> bool:
        """False for a request that failed or was never run (nothing was stamped)."""
        return self.compute_end != 0


class StepTimeline(RequestTimeline):
    """One step of a traced ensemble request: the step's model, when the ensemble submitted
    it (``submitted``) and when its answer came back (``finished``; 0 if it never did)."""

    __slots__ = ("finished", "model", "submitted", "version")

    def __init__(self, model: str, submitted: int) -> None:
        super().__init__()
        self.model = model
        self.version = ""
        self.submitted = submitted
        self.finished = 0


class InferFuture(concurrent.futures.Future[Outputs]):
    """The pending result of one inference.

    ``cancel()`` succeeds only while the request is still queued; a cancelled request never
    runs. ``await future`` suspends the awaiting coroutine only, never a thread.
    """

    request_id: str | None = None
    # The model and version serving the request, as the engine resolved them when it was
    # submitted (the version as V2 writes it, a string): a response names them without the
    # caller looking the model up again.
    model_name: str | None = None
    model_version: str | None = None
    completion_seq: int = -1
    # Set only for a request being traced (see docs/tracing.md): the engine stamps its
    # queue and compute times here before it answers; None costs the engine one check.
    timeline: RequestTimeline | None = None

    # Stamped under the future's own lock: a second answer (an instance thread returning
    # after its execution timeout failed the request) raises InvalidStateError and must
    # not restamp the first. The state is read directly (done() would take the lock again:
    # every request pays this).
    def set_result(self, result: Outputs) -> None:
        with self._condition:
            if self._state not in _SETTLED:
                self.completion_seq = next(_completion_order)
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        with self._condition:
            if self._state not in _SETTLED:
                self.completion_seq = next(_completion_order)
            super().set_exception(exception)

    def _invoke_callbacks(self) -> None:
        # Each callback runs once (added later, it runs at once); then they are let go: a
        # callback often holds what holds this future (an ensemble's run holds its request's
        # future), a cycle that only the garbage collector would free.
        super()._invoke_callbacks()  # type: ignore[misc]  # Future's own step, not in its stubs
        self._done_callbacks: list[Callable[..., object]] = []

    def cancel(self) -> bool:
        cancelled = super().cancel()
        if cancelled and self.completion_seq < 0:
            self.completion_seq = next(_completion_order)
        return cancelled

    def __await__(self) -> Generator[Any, None, Outputs]:
        """Await from any asyncio loop; no thread waits. Cancelling the awaiting task
        cancels the request (dropped if still queued), as ``asyncio.wrap_future`` does."""
        if not self.done():
            loop = asyncio.get_running_loop()
            waiter = loop.create_future()
            box = mailbox(loop)  # the engine thread's wakeup is shared with other answers
            self.add_done_callback(lambda _: box.post(_wake, waiter))
            try:
                yield from waiter
            except asyncio.CancelledError:
                self.cancel()
                raise
        if self.cancelled():
            raise asyncio.CancelledError()
        return self.result()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def as_completed(
    futures: Iterable[concurrent.futures.Future[Any]], timeout: float | None = None
) -> Iterator[concurrent.futures.Future[Any]]:
    """Yield ``futures`` as they complete (strictly in completion order).

    Raises TimeoutError when ``timeout`` seconds pass before all have completed.
    """
    pending = list(dict.fromkeys(futures))
    arrivals: queue.SimpleQueue[concurrent.futures.Future[Any]] = queue.SimpleQueue()
    for fut in pending:
        fut.add_done_callback(arrivals.put)
    deadline = None if timeout is None else time.monotonic() + timeout
    ready: list[concurrent.futures.Future[Any]] = []
    for _ in range(len(pending)):
        if not ready:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"as_completed: not all futures completed within {timeout} s")
            try:
                ready.append(arrivals.get(timeout=remaining))
            except queue.Empty:
                raise TimeoutError(
                    f"as_completed: not all futures completed within {timeout} s"
                ) from None
        while True:  # take every arrival already there, then yield the earliest completed
            try:
                ready.append(arrivals.get_nowait())
            except queue.Empty:
                break
        ready.sort(key=_completion_seq, reverse=True)
        yield ready.pop()


def _completion_seq(fut: concurrent.futures.Future[Any]) -> int:
    return getattr(fut, "completion_seq", -1)


async def as_completed_async(
    futures: Iterable[concurrent.futures.Future[Any]], timeout: float | None = None
) -> AsyncIterator[concurrent.futures.Future[Any]]:
    """Async form of :func:`as_completed`: ``async for f in as_completed_async(fs)``.

    Yields the original futures (completed), in the order they completed.
    """
    pending = list(futures)
    if not pending:
        return
    loop = asyncio.get_running_loop()
    done_queue: asyncio.Queue[concurrent.futures.Future[Any]] = asyncio.Queue()

    def on_done(fut: concurrent.futures.Future[Any]) -> None:
        # Runs on whatever thread completed the future; hop onto the loop to enqueue.
        loop.call_soon_threadsafe(done_queue.put_nowait, fut)

    for fut in pending:
        fut.add_done_callback(on_done)
    deadline = None if timeout is None else loop.time() + timeout
    for _ in range(len(pending)):
        remaining = None if deadline is None else max(0.0, deadline - loop.time())
        try:
            yield await asyncio.wait_for(done_queue.get(), remaining)
        except TimeoutError:
            raise TimeoutError(
                f"as_completed_async: not all futures completed within {timeout} s"
            ) from None
