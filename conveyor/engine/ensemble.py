"""An ensemble served like a model version: one request runs its steps as a graph.

Each step is a request to its own model through the engine's ``submit``, so it waits in that
model's queue, is batched with that model's other requests, runs on its instances and is
counted in its statistics. No thread waits for a step: a step's done callback (on the
instance thread that finished it) stores its outputs and submits every step whose inputs now
all exist, so steps that do not depend on each other are in their models' queues at once.
Tensors pass from step to step as the same numpy arrays (no copies); the ensemble itself only
checks its inputs, keeps its own statistics and names the step that failed.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any, Protocol

import numpy as np

from conveyor.engine.inputs import v2_name
from conveyor.engine.outputs import output_names
from conveyor.engine.stats import ModelStatistics, StatsRecorder
from conveyor.errors import (
    ConveyorError,
    DeadlineExceeded,
    InvalidInput,
    ModelError,
    RepositoryError,
    ShuttingDown,
)
from conveyor.futures import InferFuture, Outputs, RequestTimeline, StepTimeline
from conveyor.protocol import triton_words as triton
from conveyor.protocol.datatypes import BYTES, numpy_dtype
from conveyor.protocol.request import InferenceRequest
from conveyor.repository.config import ModelConfig, TensorSpec
from conveyor.repository.ensemble import ENSEMBLE, MAX_NESTING, check_graph, too_deep

# The steps this thread is about to launch, across every ensemble request (see _launch_all).
_launching = threading.local()


class StepModels(Protocol):
    """What an ensemble needs from the engine: its step models, and a way to run them."""

    def submit_request(
        self, request: InferenceRequest, *, timeline: RequestTimeline | None = None
    ) -> InferFuture: ...

    def model(self, name: str, version: int | str | None = None) -> Any: ...

    def nesting(self, name: str, version: int | str | None = None) -> int: ...


class _Gate:
    """The ensemble's in-flight requests: closed, it takes no more (the engine's drain)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._in_flight = 0
        self.closed = False

    def enter(self, name: str) -> None:
        with self._condition:
            if self.closed:
                raise ShuttingDown(f"ensemble {name!r} is shutting down; it takes no new requests")
            self._in_flight += 1

    def leave(self) -> None:
        with self._condition:
            self._in_flight -= 1
            self._condition.notify_all()

    def close(self) -> None:
        with self._condition:
            self.closed = True

    def wait_empty(self, timeout: float | None) -> bool:
        with self._condition:
            return self._condition.wait_for(lambda: self._in_flight == 0, timeout)

    def __len__(self) -> int:
        return self._in_flight


class EnsembleVersion:
    """An ensemble version, with the interface of a loaded model version."""

    def __init__(self, config: ModelConfig, version: int, models: StepModels) -> None:
        self.name = config.name
        self.version = version
        self.version_label = str(version)
        self.config = config
        self.platform = ENSEMBLE
        self.loaded_copies = 0
        self.steps = config.ensemble_steps
        self._models = models
        inputs = (s.name for s in config.inputs)
        self._order = check_graph(self.name, inputs, (s.name for s in config.outputs), self.steps)
        self._inputs = {spec.name: spec for spec in config.inputs}
        self._required = frozenset(s.name for s in config.inputs if not s.optional)
        self._all_outputs = tuple(spec.name for spec in config.outputs)
        self._check_step_models()
        self.nesting = self._nesting()
        self.config = self._with_step_labels(config)
        # Which steps read each tensor, and how many tensors each step waits for.
        self._step_tensors = {t for step in self.steps for t in step.output_map.values()}
        self._readers: dict[str, list[int]] = {}
        for index, step in enumerate(self.steps):
            for tensor in set(step.input_map.values()):
                self._readers.setdefault(tensor, []).append(index)
        self.stats = StatsRecorder(self.name, version)
        self.queue = _Gate()  # the engine closes every version's queue first when it drains

    def _check_step_models(self) -> None:
        """Every step's model is loaded, has the mapped inputs and outputs, and agrees with
        the ensemble on each tensor's datatype."""
        datatypes: dict[str, tuple[str, str]] = {
            s.name: (s.datatype, "the ensemble's input") for s in self.config.inputs
        }
        for index, step in enumerate(self.steps):
            where = f"model {self.name!r}: ensemble {step.label(index)}"
            try:
                config: ModelConfig = self._models.model(step.model, step.version).config
            except ConveyorError as exc:
                reason = _shortened(exc.message)
                raise RepositoryError(f"{where} cannot run: {reason}") from None
            for kind, mapping, specs in (
                ("input", step.input_map, config.inputs),
                ("output", step.output_map, config.outputs),
            ):
                known = {spec.name: spec for spec in specs}
                for model_tensor, tensor in mapping.items():
                    spec = known.get(model_tensor)
                    if spec is None:
                        raise RepositoryError(
                            f"{where}: {step.model!r} has no {kind} {model_tensor!r}; its "
                            f"{kind}s are {', '.join(known)}"
                        )
                    if kind == "output":
                        datatypes.setdefault(tensor, (spec.datatype, step.label(index)))
            missing = [s.name for s in config.inputs if not s.optional]
            missing = [name for name in missing if name not in step.input_map]
            if missing:
                raise RepositoryError(
                    f"{where}: input_map does not give {step.model!r} its input {missing[0]!r}"
                )
        for spec in self.config.outputs:
            datatypes.setdefault(spec.name, (spec.datatype, "the ensemble's output"))
        for index, step in enumerate(self.steps):
            config = self._models.model(step.model, step.version).config
            wants = {s.name: s.datatype for s in config.inputs}
            for model_input, tensor in step.input_map.items():
                datatype, source = datatypes[tensor]
                if wants[model_input] != datatype:
                    raise RepositoryError(
                        f"model {self.name!r}: ensemble {step.label(index)} input "
                        f"{model_input!r} is {wants[model_input]}, but tensor "
                        f"{tensor!r} from {source} is {datatype}"
                    )
        for spec in self.config.outputs:
            datatype, source = datatypes[spec.name]
            if spec.datatype != datatype:
                raise RepositoryError(
                    f"model {self.name!r}: ensemble output {spec.name!r} is {spec.datatype}, "
                    f"but {source} makes it {datatype}"
                )

    def _nesting(self) -> int:
        """How deep ensembles nest in this one (1: no step is an ensemble).

        A finished step completes the ensemble that ran it from inside its own done
        callback, so each level adds a few frames to the stack of the thread that finished
        the innermost step: the depth is bounded (MAX_NESTING) so no nesting can overflow it.
        """
        inner = [self._models.nesting(step.model, step.version) for step in self.steps]
        nesting = 1 + max(inner, default=0)
        if nesting > MAX_NESTING:
            raise too_deep(self.name, nesting)
        return nesting

    def _with_step_labels(self, config: ModelConfig) -> ModelConfig:
        """An output with no labels of its own takes those of the step model output that
        makes it (as Triton completes an ensemble's labels at load), so a classification
        request answers ``score:index:label`` through the ensemble as from the model."""
        made_by: dict[str, tuple[str, ...]] = {}
        for step in self.steps:
            specs = {s.name: s for s in self._models.model(step.model, step.version).config.outputs}
            for model_output, tensor in step.output_map.items():
                made_by[tensor] = specs[model_output].labels
        outputs = tuple(
            dataclasses.replace(spec, labels=made_by[spec.name])
            if not spec.labels and made_by.get(spec.name)
            else spec
            for spec in config.outputs
        )
        return dataclasses.replace(config, outputs=outputs)

    # -- submitting -------------------------------------------------------------------------

    def submit(
        self, request: InferenceRequest, *, timeline: RequestTimeline | None = None
    ) -> InferFuture:
        """``timeline``: a traced request's; each step it runs adds a timeline of its own
        (:class:`StepTimeline`) to ``timeline.steps``. The steps run without the request's
        parameters or sequence (the engine refuses a sequence)."""
        timeout = request.timeout
        arrays = self._check_inputs(request.inputs)
        wanted = self._check_outputs_requested(request.outputs)
        if timeout is not None and timeout < 0:
            raise InvalidInput(f"timeout must be >= 0 seconds, got {timeout}")
        future = InferFuture()
        future.request_id = request.id
        future.model_name = self.name
        future.model_version = self.version_label
        self.queue.enter(self.name)
        run = _Run(self, future, arrays, wanted, request.priority, timeout, request.id, timeline)
        run.start()
        return future

    def _check_inputs(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Names and datatypes; shapes are checked by the step models that read them."""
        for name in inputs:
            if name not in self._inputs:
                raise InvalidInput(
                    triton.first(
                        triton.unexpected_input(self.name, name),
                        f"model {self.name!r} has no input {name!r}; its inputs are "
                        f"{', '.join(self._inputs)}",
                    )
                )
        missing = self._required.difference(inputs)
        if missing:
            declared = list(self._inputs)
            raise InvalidInput(
                triton.first(
                    triton.input_count(
                        self.name,
                        len(declared),
                        [name for name in declared if name in self._required],
                        list(inputs),
                        [name for name in declared if name in missing],
                    ),
                    f"model {self.name!r}: missing input {sorted(missing)[0]!r}; "
                    f"it expects {', '.join(self._inputs)}",
                )
            )
        arrays = {}
        for name, value in inputs.items():
            array = value if isinstance(value, np.ndarray) else np.asarray(value)
            arrays[name] = _checked_datatype(self.name, self._inputs[name], array)
        return arrays

    def _check_outputs_requested(self, outputs: Sequence[str] | None) -> tuple[str, ...]:
        return output_names(self.name, outputs, self._all_outputs)

    # -- state ------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Ready while every step's model is loaded and ready."""
        for step in self.steps:
            try:
                if not self._models.model(step.model, step.version).ready:
                    return False
            except ConveyorError:
                return False
        return True

    def unready_reason(self) -> str:
        return f"ensemble {self.name!r} is not ready: one of its step models is not ready"

    def warm_up(self) -> None:
        """An ensemble has no warmup of its own (its step models warm themselves up)."""

    def statistics(self) -> ModelStatistics:
        return self.stats.snapshot(pending=len(self.queue))

    def close(self, timeout: float | None = None) -> bool:
        """Take no new requests and wait for the running ones (their steps drain in their
        own models)."""
        self.queue.close()
        return self.queue.wait_empty(timeout)


class _Run:
    """One ensemble request in flight: the tensors so far, and the steps still to run."""

    def __init__(
        self,
        ensemble: EnsembleVersion,
        future: InferFuture,
        tensors: dict[str, np.ndarray],
        wanted: tuple[str, ...],
        priority: int,
        timeout: float | None,
        request_id: str | None,
        timeline: RequestTimeline | None = None,
    ) -> None:
        self.ensemble = ensemble
        self.timeline = timeline
        self.future = future
        self.tensors = tensors
        self.wanted = wanted
        self.priority = priority
        self.request_id = request_id
        self.started = time.monotonic()
        self.deadline = None if timeout is None else self.started + timeout
        self.lock = threading.Lock()
        steps = ensemble.steps
        # How many distinct tensors each step waits for from other steps (an optional
        # ensemble input the request left out is not waited for: the step goes without it).
        made = ensemble._step_tensors
        self.waiting = [len({t for t in s.input_map.values() if t in made}) for s in steps]
        self.remaining = len(steps)
        self.in_flight: dict[int, InferFuture] = {}
        self.step_timelines: dict[int, StepTimeline] = {}  # a traced request's steps
        self.finished = False
        future.add_done_callback(self._on_answered)

    def start(self) -> None:
        self._launch_all(i for i in self.ensemble._order if self.waiting[i] == 0)

    def _launch_all(self, indexes: Iterable[int]) -> None:
        """Launch these steps, without nesting calls.

        A step that finishes before its done callback is added (a fast model, or one that
        fails at once) runs that callback here, inside ``_launch``; launching the steps it
        unblocks from there would nest a few frames per step, and a long chain of such steps
        (or a step that is itself an ensemble, whose submit starts its own steps) would
        overflow the stack. So while this thread is launching, steps found ready, by this
        request or any other, are queued and launched by the outermost loop.
        """
        pending: collections.deque[tuple[_Run, int]] | None = getattr(_launching, "queue", None)
        if pending is not None:
            pending.extend((self, index) for index in indexes)
            return
        pending = collections.deque((self, index) for index in indexes)
        _launching.queue = pending
        try:
            while pending:
                run, index = pending.popleft()
                try:
                    run._launch(index)
                except Exception as exc:  # not a step's refusal (_launch answers those)
                    run._fail(index, exc)  # that request fails; the others queued still go
        finally:
            _launching.queue = None

    def _launch(self, index: int) -> None:
        step = self.ensemble.steps[index]
        try:
            timeout = None
            if self.deadline is not None:
                timeout = self.deadline - time.monotonic()
                if timeout <= 0:
                    raise DeadlineExceeded("the request's timeout passed before this step ran")
            inputs = {
                name: self.tensors[tensor]
                for name, tensor in step.input_map.items()
                if tensor in self.tensors
            }
            step_timeline = None
            if self.timeline is not None:  # traced: the step is a request of its own
                step_timeline = StepTimeline(step.model, time.perf_counter_ns())
                self.step_timelines[index] = step_timeline
                self.timeline.steps.append(step_timeline)
            step_request = InferenceRequest(
                step.model,
                inputs,
                step.version,
                tuple(step.output_map),
                self.request_id,
                self.priority,
                timeout,
            )
            step_future = self.ensemble._models.submit_request(step_request, timeline=step_timeline)
            if step_timeline is not None:
                step_timeline.version = step_future.model_version or ""
        except ConveyorError as exc:
            self._fail(index, exc)
            return
        with self.lock:
            if self.finished:
                step_future.cancel()
                return
            self.in_flight[index] = step_future
        step_future.add_done_callback(lambda done: self._on_step_done(index, done))

    def _on_step_done(self, index: int, done: Future[Outputs]) -> None:
        if self.timeline is not None:
            self.step_timelines[index].finished = time.perf_counter_ns()
        if done.cancelled():
            self._fail(index, ModelError("the step was cancelled"))
            return
        # Read, not raised: raised here, the error's traceback would hold this frame, which
        # holds the future that holds the error (a cycle only the collector frees).
        error = done.exception()
        if error is not None:
            self._fail(index, error)
            return
        produced = done.result()
        step = self.ensemble.steps[index]
        ready = []
        with self.lock:
            self.in_flight.pop(index, None)
            if self.finished:
                return
            for model_output, tensor in step.output_map.items():
                self.tensors[tensor] = produced[model_output]
                for reader in self.ensemble._readers.get(tensor, ()):
                    self.waiting[reader] -= 1
                    if self.waiting[reader] == 0:
                        ready.append(reader)
            self.remaining -= 1
            complete = self.remaining == 0
            if complete:
                self.finished = True
        if complete:
            self._succeed()
            return
        self._launch_all(ready)

    def _succeed(self) -> None:
        result = {name: self.tensors[name] for name in self.wanted}
        elapsed = max(0, int((time.monotonic() - self.started) * 1e9))
        try:
            self.future.set_result(result)
        except InvalidStateError:
            return  # cancelled by the caller meanwhile
        batch = 1
        if self.ensemble.config.batching and result:
            batch = next(iter(result.values())).shape[0]
        self.ensemble.stats.record_execution(
            queue_ns=[0],
            total_ns=[elapsed],
            batch_size=batch,
            input_ns=0,
            infer_ns=elapsed,
            output_ns=0,
        )

    def _fail(self, index: int, exc: BaseException) -> None:
        """Fail the request with the step named, keeping the step error's kind."""
        with self.lock:
            if self.finished:
                return
            self.finished = True
            others = [f for i, f in self.in_flight.items() if i != index]
            self.in_flight.clear()
        for other in others:
            other.cancel()  # still queued: it need not run; running: it finishes unread
        step = self.ensemble.steps[index]
        where = f"ensemble {self.ensemble.name!r} {step.label(index)}"
        if isinstance(exc, ConveyorError):
            error: ConveyorError = type(exc)(f"{where} failed: {exc.message}")
        else:
            error = ModelError(f"{where} failed: {type(exc).__name__}: {exc}")
        elapsed = max(0, int((time.monotonic() - self.started) * 1e9))
        try:
            self.future.set_exception(error)
        except InvalidStateError:
            return
        self.ensemble.stats.record_failure(elapsed)

    def _on_answered(self, future: Future[Outputs]) -> None:
        """The request is answered (or the caller cancelled it): release its place, and
        cancel the steps still queued if nobody will read them."""
        with self.lock:
            self.finished = True
            others = list(self.in_flight.values())
            self.in_flight.clear()
        for other in others:
            other.cancel()
        self.ensemble.queue.leave()


# A step's load error, quoted in its ensemble's: an ensemble of ensembles that all failed
# would otherwise quote every level's error in the next one's, growing with the square of
# the depth. The start names the step's own problem; the end is the deepest cause.
_QUOTED_HEAD = 300
_QUOTED_TAIL = 600


def _shortened(message: str) -> str:
    if len(message) <= _QUOTED_HEAD + _QUOTED_TAIL:
        return message
    return f"{message[:_QUOTED_HEAD]} … {message[-_QUOTED_TAIL:]}"


def _checked_datatype(model: str, spec: TensorSpec, array: np.ndarray) -> np.ndarray:
    if spec.datatype == BYTES:
        return array
    expected = numpy_dtype(spec.datatype)
    if array.dtype != expected:
        got = v2_name(array.dtype)
        raise InvalidInput(
            triton.first(
                triton.input_datatype(model, spec.name, got, spec.datatype),
                f"model {model!r}: input {spec.name!r} has datatype {array.dtype}; "
                f"expected {spec.datatype}",
            )
        )
    return array
