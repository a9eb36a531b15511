"""One loaded model version: its checked inputs, queue, instances and statistics."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import InvalidStateError
from pathlib import Path

import numpy as np

from conveyor.backends import get_backend, platform
from conveyor.backends.base import (
    Destinations,
    LoadedModel,
    ModelCaller,
    RequestData,
    SequenceInfo,
)
from conveyor.engine.batcher import join_inputs, padding_elements, split_outputs, wanted_outputs
from conveyor.engine.decoupled import refuse_unary, run_decoupled
from conveyor.engine.failures import FailureLog, RecentFailure
from conveyor.engine.inputs import InputCheck, as_bytes_array, known_dtype, v2_name
from conveyor.engine.instances import Instances, TakeWork, ThreadInstances
from conveyor.engine.outputs import output_names, requested_outputs
from conveyor.engine.processes import ProcessInstances, ProcessPool
from conveyor.engine.request import Request
from conveyor.engine.scheduler import BatchPolicy, RequestQueue
from conveyor.engine.sequences import SequenceQueue, check_sequence_id, control_tensors
from conveyor.engine.stats import ModelStatistics, StatsRecorder, WorkerStatus
from conveyor.engine.warmup import sample_inputs
from conveyor.errors import (
    ConveyorError,
    InvalidInput,
    ModelError,
    ModelNotReady,
    RepositoryError,
)
from conveyor.futures import InferFuture, RequestTimeline, response_parameters, with_parameters
from conveyor.protocol.datatypes import BYTES, numpy_dtype
from conveyor.protocol.request import InferenceRequest
from conveyor.repository.config import InstanceKind, ModelConfig, TensorSpec

log = logging.getLogger("conveyor.engine")


@dataclasses.dataclass(frozen=True)
class ModelActivity:
    """What the dashboard shows of a running model version beyond its statistics."""

    name: str
    version: int
    backend: str
    instance_kind: str
    instance_count: int
    workers: tuple[WorkerStatus, ...]  # process instances only
    recent_failures: tuple[RecentFailure, ...]


class ModelVersion:
    """A model version loaded and running: ``submit`` checks a request and queues it."""

    def __init__(
        self,
        config: ModelConfig,
        version: int,
        version_dir: Path,
        *,
        caller: ModelCaller | None = None,
    ) -> None:
        """``caller`` lets the model's code call other models (thread instances only)."""
        processes = None
        loaded: list[LoadedModel]
        if config.instance_kind is InstanceKind.PROCESS:
            # The model loads once, in a zygote process that forks the workers from itself.
            processes = ProcessPool(config, version_dir, caller)
            config, loaded, count = processes.config, [], config.instance_count()
        else:
            config, loaded, count = _load_in_this_process(config, version_dir, caller)
        self.name = config.name
        self.version = version
        self.version_label = str(version)  # as V2 responses name it; made once, not per request
        self.config = config
        self.platform = platform(config.backend)
        self.loaded_copies = len(loaded)
        self._loaded = loaded
        self._input_check = InputCheck(config.name, config.inputs, config.max_batch_size)
        # Inputs padded to a batch's largest shape (allow_ragged_batch); only with batching.
        self._ragged = frozenset(
            s.name for s in config.inputs if s.allow_ragged_batch and config.batching
        )
        self._outputs = {spec.name: spec for spec in config.outputs}
        self._all_outputs = tuple(spec.name for spec in config.outputs)
        self._batch_dims = 1 if config.batching else 0
        # What submit reads of the config, looked up once here rather than per request.
        self._decoupled = config.decoupled
        # An iterative sequence model's requests are sequences of their own: no slots.
        sequences = config.sequence_batching
        self._sequenced = sequences is not None and not sequences.iterative
        # And what an execution reads: whether any tensor is reshaped (config.pbtxt's
        # reshape), and the numpy dtype of each output that has one (not BYTES; not BF16
        # without ml_dtypes: that one is looked up, and refused, per execution).
        self._reshapes_inputs = any(spec.reshape is not None for spec in config.inputs)
        self._reshapes_outputs = any(spec.reshape is not None for spec in config.outputs)
        # Each output's rank and the (position, size) of its dims that are not -1.
        self._output_dims = {
            spec.name: (
                len(spec.shape),
                tuple((i, size) for i, size in enumerate(spec.shape) if size != -1),
            )
            for spec in config.outputs
        }
        # False for a Triton Python model: its outputs keep the datatypes and shapes it gave them.
        self._checks_outputs = (
            processes.checks_outputs if processes is not None else loaded[0].checks_outputs
        )
        self._output_dtypes = {
            spec.name: dtype
            for spec in config.outputs
            if (dtype := known_dtype(spec.datatype)) is not None
        }
        self._allow_timeout_override = config.allow_timeout_override
        self._default_timeout = config.default_timeout_s or None
        self._priority_levels = (
            config.dynamic_batching.priority_levels if config.dynamic_batching else 0
        )
        self.stats = StatsRecorder(config.name, version)
        self._failures = FailureLog(log, f"{config.name}-v{version}")
        self.queue: RequestQueue | SequenceQueue
        if config.sequence_batching is not None and self._sequenced:
            self.queue = SequenceQueue(
                config.name,
                config.sequence_batching,
                lanes=count,
                slots=config.sequence_batching.slots_per_instance(config.max_batch_size),
                capacity=config.max_queue_size,
                batched=config.batching,
                max_batch=max(1, config.max_batch_size),
                on_expired=self._record_expired,
            )
        else:
            self.queue = RequestQueue(
                config.name, config.max_queue_size, on_expired=self._record_expired
            )
        self._clock = self.queue.clock
        batching = config.dynamic_batching
        policy = (
            BatchPolicy(
                config.max_batch_size,
                batching.max_queue_delay_us / 1e6,
                batching.preferred_batch_sizes,
                batching.max_padded_elements,
                tuple(sorted(self._ragged)),
            )
            if batching is not None
            else None
        )
        self._policy = policy
        name = f"{config.name}-v{version}"
        take = lambda: self.queue.take(policy)  # noqa: E731 - one closure shared below
        # An asynchronous model (LoadedModel.max_in_flight) has at most that many batches
        # started; an instance thread takes a batch only once a slot is free, so the rest
        # wait in the queue (priorities, deadlines, batching) rather than in the runtime.
        in_flight = loaded[0].max_in_flight if loaded else 0
        self._slots = threading.BoundedSemaphore(max(in_flight, 1))
        if in_flight:
            take = self._take_with_slot(take)
        self._instances: Instances
        if processes is not None:
            self._instances = ProcessInstances(name, processes, count, take, self._execute)
        else:
            self._instances = ThreadInstances(
                name,
                loaded,
                count,
                take,
                self._execute,
                execution_timeout=config.execution_timeout_s,
                on_overrun=self._overrun,
                on_all_stuck=self._fail_waiting,
            )

    def _take_with_slot(self, take: TakeWork) -> TakeWork:
        def take_when_free() -> list[Request] | None:
            self._slots.acquire()
            work = take()
            if work is None:
                self._slots.release()
            return work

        return take_when_free

    # -- submitting -------------------------------------------------------------------------

    def submit(
        self,
        request: InferenceRequest,
        *,
        future: InferFuture | None = None,
        timeline: RequestTimeline | None = None,
        destinations: Destinations | None = None,
    ) -> InferFuture:
        """Queue ``request`` (its model and version already resolved to this one).

        ``future``: the one to answer (a stream's, see engine/decoupled.py); None: a new one.
        ``destinations``: where the caller has room for outputs (see LoadedModel.run_into)."""
        if self._decoupled and future is None:
            raise refuse_unary(self.name)
        if self._instances.all_stuck:
            raise ModelNotReady(self.unready_reason())
        arrays, batch_size = self._input_check.check(request.inputs)
        sequence = request.sequence
        if self._sequenced:
            arrays.update(self._sequence_controls(sequence, batch_size))
        outputs = request.outputs
        wanted = self._all_outputs if outputs is None else self._check_outputs_requested(outputs)
        now = self._clock()
        timeout = request.timeout
        priority = request.priority
        if timeout is not None:
            if timeout < 0:
                raise InvalidInput(f"timeout must be >= 0 seconds, got {timeout}")
            if not self._allow_timeout_override:
                timeout = self._default_timeout or timeout
        else:
            timeout = self._default_timeout
        if self._priority_levels:
            priority = self._queue_priority(priority)
        if future is None:
            future = InferFuture()
        future.request_id = request.id
        future.model_name = self.name
        future.model_version = self.version_label
        if timeline is not None:
            future.timeline = timeline
        batch_key: tuple[object, ...] = ()
        if self._policy is not None:
            # Requests batch together when their inputs agree beyond the batch dimension;
            # a ragged input need only agree in rank (join_inputs pads it).
            batch_key = tuple(
                (name, arrays[name].ndim if name in self._ragged else arrays[name].shape[1:])
                for name in sorted(arrays)
            )
        self.queue.put(
            # Positional, in field order (a third of the keyword call's cost; the order is
            # pinned by tests/engine/test_request_fields.py).
            Request(
                arrays,
                wanted,
                priority,
                None if timeout is None else now + timeout,
                future,
                now,
                batch_size,
                batch_key,
                sequence,
                request.parameters,
                destinations or None,
            )
        )
        return future

    def _sequence_controls(
        self, sequence: SequenceInfo | None, batch_size: int
    ) -> dict[str, np.ndarray]:
        batching = self.config.sequence_batching
        assert batching is not None
        if sequence is None:
            # Triton's wording first, then ours.
            raise InvalidInput(
                f"inference request to model '{self.name}' must specify a non-zero or "
                f"non-empty correlation ID: model {self.name!r} is a sequence model; send "
                "sequence_id (with sequence_start on a sequence's first request)"
            )
        check_sequence_id(self.name, batching, sequence)
        if batch_size != 1:
            raise InvalidInput(
                f"model {self.name!r}: a request of a sequence must have batch size 1, "
                f"got {batch_size}"
            )
        return control_tensors(batching, sequence, batched=bool(self._batch_dims))

    def _queue_priority(self, priority: int) -> int:
        """The queue's priority (higher first) for a request's priority.

        With Triton's priority_levels (config.pbtxt) a request's priority is a level, 1 the
        highest; 0 or a level past the last takes default_priority_level, as in Triton.
        Without them the request's priority is the queue's as it is.
        """
        batching = self.config.dynamic_batching
        if batching is None or not batching.priority_levels:
            return priority
        levels = batching.priority_levels
        level = priority if 1 <= priority <= levels else batching.default_priority_level
        return levels - level

    def _check_outputs_requested(self, outputs: Sequence[str] | None) -> tuple[str, ...]:
        return output_names(self.name, outputs, self._all_outputs)

    # -- running (on instance threads) ------------------------------------------------------

    def _execute(self, model: LoadedModel, batch: list[Request]) -> None:
        if self._decoupled:
            run_decoupled(self, model, batch)
            return
        clock = self.queue.clock
        started = clock()
        t0 = time.perf_counter_ns()
        try:
            if model.separate_requests:
                requests = [
                    RequestData(
                        self._reshaped(dict(r.inputs), self.config.inputs, reshape=True),
                        r.outputs,
                        r.future.request_id,
                        r.sequence,
                        r.parameters or {},
                    )
                    for r in batch
                ]
                t1 = time.perf_counter_ns()
                outcomes = model.run_requests(requests)
                t2 = time.perf_counter_ns()
                if isinstance(self.queue, SequenceQueue):
                    self.queue.keep_states(batch, list(outcomes))
                results = [
                    self._checked_outcome(outcome, request)
                    for outcome, request in zip(outcomes, batch, strict=True)
                ]
            else:
                joined = join_inputs(batch, self._ragged)
                if self._ragged:
                    self.stats.record_padding(*padding_elements(batch, joined, self._ragged))
                inputs = (
                    self._reshaped(joined, self.config.inputs, reshape=True)
                    if self._reshapes_inputs
                    else joined
                )
                wanted = wanted_outputs(batch)
                t1 = time.perf_counter_ns()
                if model.max_in_flight:
                    # Asynchronous: the runtime's completion callback finishes the batch,
                    # and this instance thread goes on to take the next one.
                    model.start(
                        inputs,
                        wanted,
                        lambda outcome: self._finish_started(
                            batch, wanted, outcome, started, (t0, t1)
                        ),
                    )
                    return
                destinations = self._destinations(batch)
                if destinations:
                    produced = model.run_into(inputs, wanted, destinations)
                else:
                    produced = model.run(inputs, wanted)
                t2 = time.perf_counter_ns()
                results = self._split_produced(produced, wanted, batch)
        except Exception as exc:
            self._fail_batch(batch, exc)
            if model.max_in_flight:
                self._slots.release()  # it never started: no callback will free its slot
            return
        self._deliver(batch, results, started, (t0, t1, t2))

    def _destinations(self, batch: list[Request]) -> Destinations | None:
        """A lone request's destinations, when its outputs may be computed into them.

        Not for an execution of several requests (their outputs are one joined tensor), nor
        for a stateful model (an output kept as the next state must not live in a region
        the client may overwrite).
        """
        if len(batch) != 1 or isinstance(self.queue, SequenceQueue):
            return None
        return batch[0].destinations

    def _split_produced(
        self, produced: dict[str, np.ndarray], wanted: tuple[str, ...], batch: list[Request]
    ) -> list[dict[str, np.ndarray] | ConveyorError]:
        if self._reshapes_outputs:
            produced = self._reshaped(produced, self.config.outputs, reshape=False)
        if isinstance(self.queue, SequenceQueue):  # implicit state, kept per sequence
            self.queue.keep_states(batch, _rows(produced, len(batch), self._batch_dims))
        joined = self._check_produced(produced, wanted, sum(r.batch_size for r in batch))
        return list(split_outputs(joined, batch))

    def _finish_started(
        self,
        batch: list[Request],
        wanted: tuple[str, ...],
        outcome: dict[str, np.ndarray] | Exception,
        started: float,
        times: tuple[int, int],
    ) -> None:
        """An asynchronous execution's end, on the runtime's completion thread."""
        try:
            t2 = time.perf_counter_ns()
            if isinstance(outcome, Exception):
                self._fail_batch(batch, outcome)
                return
            try:
                results = self._split_produced(outcome, wanted, batch)
            except Exception as exc:
                self._fail_batch(batch, exc)
                return
            self._deliver(batch, results, started, (*times, t2))
        finally:
            self._slots.release()

    def _fail_batch(self, batch: list[Request], exc: Exception) -> None:
        error = exc if isinstance(exc, ConveyorError) else _model_failed(self.name, exc)
        self._failures.failed(error.message, error.model_traceback)
        failed = [request for request in batch if _settle(request, error=error)]
        ended = self.queue.clock()
        for request in failed:
            self.stats.record_failure(_ns(ended - request.enqueued))

    def _deliver(
        self,
        batch: list[Request],
        results: Sequence[dict[str, np.ndarray] | ConveyorError],
        started: float,
        times: tuple[int, int, int],
    ) -> None:
        t0, t1, t2 = times
        clock = self.queue.clock
        total = sum(r.batch_size for r in batch)
        for request in batch:  # tracing: one check per request when it is off
            if request.future.timeline is not None:
                _stamp_timelines(batch, started, times, total)
                break
        # Requests the watchdog already failed (execution timeout) are neither answered
        # twice nor counted as successes.
        delivered = []
        refused = []
        for request, result in zip(batch, results, strict=True):
            if isinstance(result, ConveyorError):
                if _settle(request, error=result):
                    refused.append(request)
            elif _settle(request, result=result):
                delivered.append(request)
        t3 = time.perf_counter_ns()
        ended = clock()
        for request in refused:
            self.stats.record_failure(_ns(ended - request.enqueued))
        if not delivered:
            return
        self.stats.record_execution(
            queue_ns=[_ns(started - r.enqueued) for r in delivered],
            total_ns=[_ns(ended - r.enqueued) for r in delivered],
            batch_size=total,
            input_ns=t1 - t0,
            infer_ns=t2 - t1,
            output_ns=t3 - t2,
        )

    def _checked_outcome(
        self, outcome: dict[str, np.ndarray] | Exception, request: Request
    ) -> dict[str, np.ndarray] | ConveyorError:
        """One request's result from a model that answers requests one by one, or its error."""
        if isinstance(outcome, ConveyorError):
            return outcome
        if isinstance(outcome, Exception):
            return _model_failed(self.name, outcome)
        try:
            outcome = self._reshaped(outcome, self.config.outputs, reshape=False)
            return self._check_produced(outcome, request.outputs, request.batch_size)
        except ConveyorError as error:
            self._failures.failed(error.message, error.model_traceback)
            return error

    def _reshaped(
        self, arrays: dict[str, np.ndarray], specs: Sequence[TensorSpec], *, reshape: bool
    ) -> dict[str, np.ndarray]:
        """config.pbtxt's reshape: the model takes (``reshape``) or gives its tensors in
        another shape than requests and responses carry; the batch dimension stays."""
        for spec in specs:
            array = arrays.get(spec.name)
            if spec.reshape is None or array is None:
                continue
            target = spec.reshape if reshape else spec.shape
            lead = array.shape[: self._batch_dims]
            try:
                arrays[spec.name] = array.reshape((*lead, *target))
            except ValueError:
                raise ModelError(
                    f"model {self.name!r}: {spec.name!r} of shape {list(array.shape)} cannot "
                    f"be reshaped to {[*lead, *target]} (reshape in config.pbtxt)"
                ) from None
        return arrays

    def _check_produced(
        self, produced: dict[str, np.ndarray], wanted: tuple[str, ...], total: int
    ) -> dict[str, np.ndarray]:
        checked = requested_outputs(self.name, produced, wanted)
        for name, array in checked.items():
            spec = self._outputs[name]
            if spec.datatype == BYTES:
                if array.dtype.kind in "US":
                    array = as_bytes_array(array, self.name, name)
                elif array.dtype != object:
                    raise ModelError(
                        f"model {self.name!r} returned datatype {v2_name(array.dtype)} for "
                        f"BYTES output {name!r}; expected an object array of bytes"
                    )
            elif self._checks_outputs and array.dtype != self._output_dtype(name, spec.datatype):
                raise ModelError(
                    f"model {self.name!r} returned datatype {v2_name(array.dtype)} for output "
                    f"{name!r}; expected {spec.datatype}"
                )
            if self._checks_outputs and not self._output_shape_fits(array.shape, name, total):
                expected = [total, *spec.shape] if self._batch_dims else list(spec.shape)
                raise ModelError(
                    f"model {self.name!r} returned shape {list(array.shape)} for output "
                    f"{name!r}; expected {expected}"
                )
            checked[name] = array
        # The response parameters a model set travel with its outputs (Triton models).
        return with_parameters(checked, response_parameters(produced))

    def _output_shape_fits(self, shape: tuple[int, ...], name: str, total: int) -> bool:
        """Output ``name``'s shape is the declared one (-1: any size), after the batch's
        ``total`` rows first when the model batches."""
        if self._batch_dims:
            if not shape or shape[0] != total:
                return False
            shape = shape[1:]
        rank, fixed = self._output_dims[name]
        return len(shape) == rank and all(shape[i] == size for i, size in fixed)

    def _output_dtype(self, name: str, datatype: str) -> np.dtype:
        expected = self._output_dtypes.get(name)
        return expected if expected is not None else numpy_dtype(datatype)

    def _overrun(self, instance: int, batch: list[Request]) -> None:
        """Watchdog: an execution on a thread instance passed ``execution_timeout_s``."""
        timeout = self.config.execution_timeout_s
        error = ModelError(
            f"model {self.name!r} did not finish within its execution_timeout_s of "
            f"{timeout:g} s; its instance {instance} is out of service until that execution "
            'returns (a thread cannot be stopped; instance_kind = "process" kills and '
            "replaces a stuck worker)"
        )
        log.error("%s", error.message)
        for request in batch:
            if _settle(request, error=error):
                self._record_expired(request)

    def _fail_waiting(self) -> None:
        """Watchdog, while every instance is stuck: nothing can run what is queued."""
        for request in self.queue.take_waiting():
            request.future.set_exception(ModelNotReady(self.unready_reason()))
            self._record_expired(request)

    def unready_reason(self) -> str:
        count, timeout = self._instances.count, self.config.execution_timeout_s
        return (
            f"model {self.name!r} is not ready: all {count} of its instances are stuck in "
            f"executions past its execution_timeout_s of {timeout:g} s"
        )

    def warm_up(self) -> None:
        """Run config.pbtxt's model_warmup samples; RepositoryError if one fails."""
        for sample in self.config.warmup:
            inputs = sample_inputs(self.name, sample, self.config.batching)
            for _ in range(sample.count):
                try:
                    self.submit(InferenceRequest(self.name, inputs)).result()
                except ConveyorError as exc:
                    raise RepositoryError(
                        f"model {self.name!r}: model_warmup {sample.name!r} failed: {exc.message}"
                    ) from None

    @property
    def ready(self) -> bool:
        """False while every instance is stuck in an execution past its timeout."""
        return not self._instances.all_stuck

    def _record_expired(self, request: Request) -> None:
        self.stats.record_failure(_ns(self.queue.clock() - request.enqueued))

    # -- state ------------------------------------------------------------------------------

    def statistics(self) -> ModelStatistics:
        return self.stats.snapshot(pending=len(self.queue))

    def activity(self) -> ModelActivity:
        """How its instances run, their workers, and its last failures."""
        instances = self._instances
        workers = instances.workers() if isinstance(instances, ProcessInstances) else ()
        return ModelActivity(
            name=self.name,
            version=self.version,
            backend=self.config.backend,
            instance_kind=str(self.config.instance_kind),
            instance_count=instances.count,
            workers=workers,
            recent_failures=self._failures.recent(),
        )

    def close(self, timeout: float | None = None) -> bool:
        """Take no new requests, finish every queued and running one, release the model."""
        self.queue.close()
        drained = self._instances.join(timeout)
        # A thread stuck past execution_timeout_s may still be inside the model: leave the
        # model to the garbage collector rather than release it under that thread.
        if drained and not self._instances.alive():
            for model in self._loaded:
                model.close()
        return drained


def _load_in_this_process(
    config: ModelConfig, version_dir: Path, caller: ModelCaller | None
) -> tuple[ModelConfig, list[LoadedModel], int]:
    """Thread instances: one loaded copy shared by all, or one per instance if not thread-safe."""
    backend = get_backend(config.backend)
    first = backend.load(config, version_dir, caller=caller)
    loaded: list[LoadedModel] = [first]
    try:
        config = backend.complete_config(config, first)
        if not config.outputs:
            raise RepositoryError(f"model {config.name!r}: it has no outputs")
        if not config.inputs and config.max_batch_size > 0:
            # A request's batch size is read from its inputs.
            raise RepositoryError(
                f"model {config.name!r}: it has no inputs and max_batch_size "
                f"{config.max_batch_size}; a model without inputs takes max_batch_size 0"
            )
        count = config.instance_count()
        # A model that is not thread-safe gets one loaded copy per instance.
        if not first.thread_safe:
            loaded += [backend.load(config, version_dir, caller=caller) for _ in range(count - 1)]
    except BaseException:
        for model in loaded:
            model.close()
        raise
    return config, loaded, count


def _rows(
    produced: dict[str, np.ndarray], count: int, batch_dims: int
) -> list[dict[str, np.ndarray]]:
    """A joined execution's outputs, one dict per request (each of batch size 1)."""
    if not batch_dims:
        return [produced] * count
    return [
        {name: array[i : i + 1] for name, array in produced.items() if array.ndim}
        for i in range(count)
    ]


def _settle(
    request: Request, *, result: dict[str, np.ndarray] | None = None, error: Exception | None = None
) -> bool:
    """Answer a request unless it was answered already; True if this call answered it."""
    try:
        if error is not None:
            request.future.set_exception(error)
        else:
            request.future.set_result(result)  # type: ignore[arg-type]
    except InvalidStateError:
        return False
    return True


def _stamp_timelines(
    batch: list[Request], started: float, times: tuple[int, int, int], total: int
) -> None:
    """Stamp the traced requests of an execution, before any of them is answered.

    The readings are the statistics' own: compute start, inputs ready and outputs started
    (``times``), and each request's queue time (``started - enqueued`` on the queue clock,
    which may be injected) placed before the compute start.
    """
    t0, t1, t2 = times
    t3 = time.perf_counter_ns()  # outputs split and checked; the answers are sent next
    for request in batch:
        timeline = request.future.timeline
        if timeline is None:
            continue
        timeline.queue_start = t0 - _ns(started - request.enqueued)
        if request.taken:  # batch formation: taken into the batch until it was dispatched
            timeline.batch_start = t0 - _ns(started - request.taken)
        timeline.compute_start = t0
        timeline.compute_input_end = t1
        timeline.compute_output_start = t2
        timeline.compute_end = t3
        timeline.batch_size = total


def _ns(seconds: float) -> int:
    return max(0, int(seconds * 1e9))


def _model_failed(name: str, exc: Exception) -> ModelError:
    """What a model's own exception becomes: its words for the client, its traceback logged."""
    error = ModelError(f"model {name!r} failed: {type(exc).__name__}: {exc}")
    error.model_traceback = "".join(traceback.format_exception(exc))
    return error
