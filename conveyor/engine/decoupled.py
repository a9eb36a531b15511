"""Decoupled models: one request, many responses, each handed to the request's stream.

A streaming request is queued like any other (same queue, priorities, deadlines and
cancellation), with a :class:`StreamFuture` that carries its :class:`ResponseStream`. When an
instance takes it, the model's ``run_stream`` sends responses through :class:`_Responses`,
which checks each one against the config and puts it in the stream; the bounded stream makes
the instance wait for a slow consumer. The future completes when the model closes the
responses (at once, or later from another thread, as a Triton response sender may), and
completing it ends the stream, with the request's error if it failed.

A model that is not decoupled can be streamed too: its one answer is the stream's only
response.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from conveyor.backends.base import LoadedModel, RequestData, Responses
from conveyor.engine.request import Request
from conveyor.errors import Cancelled, ConveyorError, ModelError, UnaryToDecoupled
from conveyor.futures import (
    InferFuture,
    Outputs,
    RequestTimeline,
    response_parameters,
    with_parameters,
)
from conveyor.protocol.request import InferenceRequest
from conveyor.streams import ResponseStream

log = logging.getLogger("conveyor.engine")

if TYPE_CHECKING:
    from conveyor.engine.failures import FailureLog
    from conveyor.engine.scheduler import RequestQueue
    from conveyor.engine.sequences import SequenceQueue
    from conveyor.engine.stats import StatsRecorder
    from conveyor.repository.config import ModelConfig, TensorSpec


class ModelVersion(Protocol):
    """What this module uses of :class:`conveyor.engine.model.ModelVersion` (named here,
    not imported, so the two modules do not import each other): its queue, statistics and
    the same output checks every response of an ordinary request gets."""

    name: str
    config: ModelConfig
    queue: RequestQueue | SequenceQueue
    stats: StatsRecorder
    _failures: FailureLog

    def submit(
        self,
        request: InferenceRequest,
        *,
        future: InferFuture | None = None,
        timeline: RequestTimeline | None = None,
    ) -> InferFuture: ...

    def _reshaped(
        self, arrays: dict[str, np.ndarray], specs: Sequence[TensorSpec], *, reshape: bool
    ) -> dict[str, np.ndarray]: ...

    def _check_produced(
        self, produced: dict[str, np.ndarray], wanted: tuple[str, ...], total: int
    ) -> dict[str, np.ndarray]: ...


class Served(Protocol):
    """Anything the engine serves under a name (a model version, an ensemble): its config
    and an ordinary ``submit``."""

    config: ModelConfig

    def submit(
        self, request: InferenceRequest, *, timeline: RequestTimeline | None = None
    ) -> InferFuture: ...


class StreamFuture(InferFuture):
    """A streaming request's future: completes (with no outputs) after its last response."""

    stream: ResponseStream


def refuse_unary(model: str) -> UnaryToDecoupled:
    return UnaryToDecoupled(
        f"doesn't support models with decoupled transaction policy: model {model!r} is "
        "decoupled (it answers a request with any number of responses); stream it "
        "(Engine.stream, gRPC ModelStreamInfer, HTTP generate_stream)"
    )


def start_stream(
    version: ModelVersion | Served,
    request: InferenceRequest,
    *,
    buffer: int,
    timeline: RequestTimeline | None = None,
) -> ResponseStream:
    """Queue ``request`` on ``version``; return the stream its responses will arrive on.
    Its sequence is never an ensemble's (the engine refuses that).

    ``timeline``: stamped as ``submit`` stamps it, plus each response of a decoupled model."""
    stream = ResponseStream(buffer)
    future: InferFuture
    if version.config.decoupled:
        # Only a model version is ever decoupled (an ensemble's config never is).
        future = StreamFuture()
        future.stream = stream
        cast(ModelVersion, version).submit(request, future=future, timeline=timeline)
        future.add_done_callback(lambda done: stream.finish(_error_of(done)))
    else:
        future = version.submit(request, timeline=timeline)
        future.add_done_callback(lambda done: _answer_once(stream, done))
    stream.request_id = future.request_id
    stream.model_name = future.model_name
    stream.model_version = future.model_version
    # A consumer that goes away drops its request if it is still queued; a running one
    # stops at its next response.
    stream.on_close(future.cancel)
    return stream


def _error_of(done: concurrent.futures.Future[Outputs]) -> BaseException | None:
    if done.cancelled():
        return Cancelled("the request was cancelled")
    return done.exception()


def _answer_once(stream: ResponseStream, done: concurrent.futures.Future[Outputs]) -> None:
    error = _error_of(done)
    if error is None:
        with contextlib.suppress(Cancelled):  # raised when nobody reads it any more
            stream.put(done.result())
    stream.finish(error)


def run_decoupled(version: ModelVersion, model: LoadedModel, batch: list[Request]) -> None:
    """On an instance thread: run ``batch``, streaming (one call for the whole batch, to a
    model that takes one: a Triton model's ``execute`` gets the batch's requests)."""
    runs: list[tuple[RequestData, Responses]] = []
    for request in batch:
        responses = _Responses(version, request)
        try:
            inputs = version._reshaped(dict(request.inputs), version.config.inputs, reshape=True)
        except Exception as exc:
            responses.close(exc)
            continue
        data = RequestData(
            inputs,
            request.outputs,
            request.future.request_id,
            request.sequence,  # a decoupled sequence model's correlation ID, flags
            request.parameters or {},
        )
        runs.append((data, responses))
    try:
        model.run_streams(runs)
    except Exception as exc:
        for _, sender in runs:
            sender.close(exc)


class _Responses:
    """One request's responses: checked, then put in its stream (the ``Responses`` a
    backend sends to)."""

    def __init__(self, version: ModelVersion, request: Request) -> None:
        self._version = version
        self._request = request
        future = request.future
        assert isinstance(future, StreamFuture), "a decoupled model's request has a stream"
        self._stream = future.stream
        self._lock = threading.Lock()
        self._closed = False
        self._started = version.queue.clock()
        self._t0 = time.perf_counter_ns()
        self._timeline = future.timeline  # set only for a traced request
        if self._timeline is not None:
            self._timeline.queue_start = self._t0 - _ns(self._started - request.enqueued)
            self._timeline.compute_start = self._t0
            self._timeline.batch_size = request.batch_size

    @property
    def cancelled(self) -> bool:
        """True once the stream's consumer went away or asked for a stop (Triton's
        ``is_cancelled``)."""
        return self._stream.closed or self._stream.cancel_requested

    def send(self, outputs: dict[str, np.ndarray], final: bool = False) -> None:
        version, request = self._version, self._request
        if self._closed:
            # Triton's words, which models compare with str(exception).
            raise ModelError("Unable to send response. Response sender has been closed.")
        if not isinstance(outputs, dict):
            raise ModelError(
                f"model {version.name!r} sent a {type(outputs).__name__} as a response; "
                "expected a dict of output name -> numpy.ndarray"
            )
        # A response may carry some of the outputs (e.g. only the next token).
        wanted = tuple(name for name in request.outputs if name in outputs)
        produced = version._reshaped(dict(outputs), version.config.outputs, reshape=False)
        checked = version._check_produced(
            with_parameters(produced, response_parameters(outputs)), wanted, request.batch_size
        )
        if self._timeline is not None:  # tracing: the model sent a response now
            self._timeline.responses.append(time.perf_counter_ns())
        self._stream.put(checked, final=final)

    def close(self, error: Exception | None = None) -> None:
        with self._lock:
            if self._closed:
                if error is not None and not isinstance(error, Cancelled):
                    # The model failed after its final response (it raised after sending
                    # the final flag): nobody can be told but the log, as Triton logs it.
                    log.error(
                        "model %r failed after its final response: %s: %s",
                        self._version.name,
                        type(error).__name__,
                        error,
                    )
                return
            self._closed = True
        version, request = self._version, self._request
        if self._timeline is not None:  # before the future completes: its reader sees it
            self._timeline.compute_end = time.perf_counter_ns()
        if error is not None and not isinstance(error, ConveyorError):
            failed = ModelError(f"model {version.name!r} failed: {type(error).__name__}: {error}")
            failed.model_traceback = "".join(traceback.format_exception(error))
            error = failed
        if isinstance(error, ConveyorError) and not isinstance(error, Cancelled):
            version._failures.failed(error.message, error.model_traceback)
        try:
            if error is not None:
                request.future.set_exception(error)
            else:
                request.future.set_result({})
        except concurrent.futures.InvalidStateError:
            return  # the watchdog failed it already (execution timeout)
        ended = version.queue.clock()
        if error is not None:
            version.stats.record_failure(_ns(ended - request.enqueued))
            return
        version.stats.record_execution(
            queue_ns=[_ns(self._started - request.enqueued)],
            total_ns=[_ns(ended - request.enqueued)],
            batch_size=request.batch_size,
            input_ns=0,
            infer_ns=time.perf_counter_ns() - self._t0,
            output_ns=0,
        )


def _ns(seconds: float) -> int:
    return max(0, int(seconds * 1e9))
