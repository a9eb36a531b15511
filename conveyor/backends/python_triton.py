"""Triton Python models: ``model.py`` defines ``TritonPythonModel``, and it runs unchanged.

The adapter between Triton's model lifecycle and Conveyor's backend interface:

- ``auto_complete_config`` (when the class has it) edits the config in Triton's JSON shape
  at load; inputs, outputs, max_batch_size and dynamic batching are read back from it;
- every instance gets its own ``TritonPythonModel`` and ``initialize(args)``, as in Triton:
  the loaded model says it is not thread-safe, so the engine loads one copy per instance;
- ``execute(requests)`` gets the batch's requests kept apart (``separate_requests``) and
  returns one response per request; a response's ``TritonError`` fails only its request,
  an exception fails them all; each output goes back in the shape the model gave it, as
  Triton's Python backend sends it (only its datatype is checked against the config);
- a decoupled model's ``execute([request])`` runs one request at a time and sends its
  responses with ``request.get_response_sender()``, now or later from another thread; the
  request ends with its ``TRITONSERVER_RESPONSE_COMPLETE_FINAL`` flag; a model that is not
  decoupled may answer through the sender too (``triton_answers``);
- ``async def execute`` runs on the instance's own event loop, which keeps running between
  calls (as the loop of Triton's stub does), so a task the model starts outlives the call
  that started it — a response sent from it 0.5 s later still arrives. A decoupled model's
  coroutine is not waited for: the instance takes its next request at once, as in Triton;
- ``finalize()`` runs when the model version is unloaded or the server stops;
- while initialize() and execute() run, ``InferenceRequest(...).exec()`` reaches the other
  models through the engine's ``caller`` (Business Logic Scripting).

On process instances (``instance_kind "process"``) the zygote completes the config and each
worker makes its own ``TritonPythonModel`` after its fork (``TritonProcessModel``); exec()
reaches the engine over the worker's channel. Decoupled models stay on thread instances.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import itertools
import json
import sys
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from conveyor.backends.base import LoadedModel, ModelCaller, RequestData, Responses
from conveyor.backends.triton_answers import OneAnswer
from conveyor.errors import InvalidInput, ModelError, RepositoryError
from conveyor.repository.backend_catalog import platform
from conveyor.repository.config import DynamicBatching, InstanceKind, ModelConfig, TensorSpec
from conveyor.repository.triton_json import model_config as triton_config_json
from conveyor.triton import pb_utils

MODULE_ALIAS = "triton_python_backend_utils"


@contextlib.contextmanager
def pb_utils_importable() -> Iterator[None]:
    """While inside, ``import triton_python_backend_utils`` gets Conveyor's pb_utils.

    Only while a model's code is imported and loaded: afterwards the name holds what it held
    before (usually nothing), so no other code finds it by accident.
    """
    before = sys.modules.get(MODULE_ALIAS)
    sys.modules[MODULE_ALIAS] = pb_utils
    try:
        yield
    finally:
        if before is None:
            sys.modules.pop(MODULE_ALIAS, None)
        else:
            sys.modules[MODULE_ALIAS] = before


# ``import model`` from a model's own code (Triton's QA models run
# ``unittest.main("model")`` in execute) finds model.py in Triton, whose stub runs one model
# per process with model.py imported as ``model``. Here every model.py has a module name of
# its own, so ``model`` is a stand-in that, on each thread, is the model.py running there.
_running: contextvars.ContextVar[ModuleType | None] = contextvars.ContextVar(
    "conveyor_triton_running_model", default=None
)


class _RunningModel(ModuleType):
    """``sys.modules["model"]``: attributes of the model.py whose code runs on this thread."""

    def __getattr__(self, name: str) -> Any:
        module = _running.get()
        if module is None:
            raise AttributeError(f"module 'model' has no attribute {name!r} (no model runs here)")
        return getattr(module, name)

    def __dir__(self) -> list[str]:
        module = _running.get()
        return dir(module) if module is not None else []


@contextlib.contextmanager
def running_model(model_class: type) -> Iterator[None]:
    """While inside, ``import model`` on this thread gives ``model_class``'s model.py."""
    if not isinstance(sys.modules.setdefault("model", _RunningModel("model")), _RunningModel):
        yield  # a real module named model is imported: it stays what ``model`` means
        return
    token = _running.set(sys.modules.get(model_class.__module__))
    try:
        yield
    finally:
        _running.reset(token)


class TritonModel(LoadedModel):
    """One instance's ``TritonPythonModel`` object."""

    thread_safe = False  # one TritonPythonModel per instance, as Triton gives each its own
    separate_requests = True
    checks_outputs = False  # as Triton's Python backend: a response's own datatypes, shapes

    def __init__(
        self,
        config: ModelConfig,
        instance: Any,
        caller: ModelCaller | None,
        version: str,
        instance_index: int = 0,
    ) -> None:
        self.config = config
        self.instance = instance
        # Triton's name of the instance (its initialize() args' model_instance_name), which
        # Triton's messages about an instance use.
        self.instance_name = f"{config.name}_0_{instance_index}"
        self._caller = caller
        self._version = int(version) if version.isdigit() else -1
        self._loop: _InstanceLoop | None = None  # made by the first ``async def execute``
        sequences = config.sequence_batching
        self._iterative = sequences is not None and sequences.iterative

    def run(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        raise ModelError(f"model {self.config.name!r}: a Triton model runs requests one by one")

    def _triton_request(self, request: RequestData) -> pb_utils.InferenceRequest:
        correlation_id, flags = _sequence_of(request, self._iterative)
        return pb_utils.InferenceRequest(
            model_name=self.config.name,
            inputs=[pb_utils.Tensor(name, array) for name, array in request.inputs.items()],
            requested_output_names=list(request.outputs),
            request_id=request.request_id or "",
            correlation_id=correlation_id,
            flags=flags,
            model_version=self._version,
            parameters=dict(request.parameters),
        )

    def _again(
        self,
        requests: Sequence[pb_utils.InferenceRequest],
        failed: Callable[[int, Exception], None],
    ) -> list[int]:
        """Which of ``requests`` (by index) the model asked to run again
        (``set_release_flags(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)``). Triton reschedules
        only for a model with ``iterative_sequence``; for another, the release fails and
        the request ends: ``failed(index, error)`` with Triton's words."""
        again = []
        for index, request in enumerate(requests):
            if not request._rescheduled():
                continue
            if self._iterative:
                again.append(index)
            else:
                failed(index, InvalidInput(NOT_RESCHEDULABLE + f" (model {self.config.name!r})"))
        return again

    def _call_execute(self, requests: list[pb_utils.InferenceRequest]) -> Any:
        """``execute(requests)``: its value, or for ``async def execute`` its coroutine."""
        with pb_utils.calling_through(self._caller), running_model(type(self.instance)):
            try:
                return self.instance.execute(requests)
            except SystemExit as exc:  # e.g. unittest.main() without exit=False
                raise _exited(self.config.name, exc) from exc

    def _execute(self, requests: list[pb_utils.InferenceRequest]) -> Any:
        try:
            returned = self._call_execute(requests)
            if inspect.isawaitable(returned):  # ``async def execute``, as Triton allows
                returned = self._start(returned).result()
        except pb_utils.TritonError as exc:
            # Raised for the whole batch: each request fails with its code's status.
            raise exc.to_conveyor() from exc
        return returned

    def _start(self, awaitable: Any) -> concurrent.futures.Future[Any]:
        """Run ``awaitable`` on this instance's event loop (started on first use)."""
        if self._loop is None:
            self._loop = _InstanceLoop(f"{self.config.name}-asyncio")
        return self._loop.submit(_awaited(awaitable, self._caller, type(self.instance)))

    def run_stream(self, request: RequestData, responses: Responses) -> None:
        self.run_streams([(request, responses)])

    def run_streams(self, requests: Sequence[tuple[RequestData, Responses]]) -> None:
        """One ``execute`` for the batch's requests, as Triton's decoupled models get them
        (a model may treat the batch's first request apart). Raising fails every request
        of the batch that the model did not end itself."""
        triton_requests = []
        for request, responses in requests:
            triton_request = self._triton_request(request)
            triton_request._stream_to(responses)
            triton_requests.append((triton_request, responses))
        self._run_decoupled(triton_requests)

    def _run_decoupled(self, requests: list[tuple[pb_utils.InferenceRequest, Responses]]) -> None:
        """``execute`` the requests, then again those the model rescheduled, until none is
        (at once, on this instance: Triton puts them back in the sequence batcher's queue)."""
        while requests:
            returned = self._call_execute([request for request, _ in requests])
            if inspect.isawaitable(returned):
                # Not waited for: the coroutine sends its responses and ends the requests
                # itself; those it reschedules run again once it is done.
                running = self._start(returned)
                running.add_done_callback(functools.partial(self._coroutine_done, ran=requests))
                return
            self._check_decoupled_return(returned)
            requests = self._decoupled_again(requests)

    def _decoupled_again(
        self, requests: list[tuple[pb_utils.InferenceRequest, Responses]]
    ) -> list[tuple[pb_utils.InferenceRequest, Responses]]:
        again = self._again(
            [request for request, _ in requests],
            lambda index, error: requests[index][1].close(error),
        )
        return [requests[index] for index in again]

    def _coroutine_done(
        self,
        done: concurrent.futures.Future[Any],
        ran: list[tuple[pb_utils.InferenceRequest, Responses]],
    ) -> None:
        try:
            self._check_decoupled_return(done.result())
        except BaseException as exc:  # the model's own error, or a cancelled coroutine
            failure = exc if isinstance(exc, Exception) else ModelError(repr(exc))
            for _, responses in ran:
                responses.close(failure)  # a no-op once the model sent its final flag
            return
        try:
            self._run_decoupled(self._decoupled_again(ran))
        except Exception as exc:
            for _, responses in ran:
                responses.close(exc)

    def _check_decoupled_return(self, returned: object) -> None:
        if returned not in (None, []):
            raise ModelError(
                f"Python model '{self.instance_name}' is using the decoupled mode and the "
                "execute function must return None. It sends its responses with "
                f"request.get_response_sender(); it returned a {type(returned).__name__}."
            )

    def run_requests(
        self, requests: Sequence[RequestData]
    ) -> list[dict[str, np.ndarray] | Exception]:
        answers = [OneAnswer(self.config.name) for _ in requests]
        outcomes: list[dict[str, np.ndarray] | Exception | None] = [None] * len(requests)
        triton_requests = self._answering(requests, answers)
        pending = list(range(len(requests)))
        while pending:  # the requests, then again those the model rescheduled
            try:
                responses = self._checked_responses([triton_requests[i] for i in pending])
            except Exception as exc:
                if len(pending) == len(requests) and not any(a.answered for a in answers):
                    raise  # the whole batch failed on its first execution
                for index in pending:
                    outcomes[index] = answers[index].fail(exc)
                break
            for index, response in zip(pending, responses, strict=True):
                outcomes[index] = answers[index].answer_or(
                    None if response is None else self._outcome(response)
                )

            def failed(at: int, error: Exception, ran: list[int] = pending) -> None:
                outcomes[ran[at]] = answers[ran[at]].fail(error)

            again = self._again([triton_requests[i] for i in pending], failed)
            pending = [pending[at] for at in again]
        # The requests are this call's alone: once they go, a sender the model did not keep
        # is freed, and its unanswered request fails (OneAnswer.dropped) instead of waiting.
        del triton_requests
        for index, outcome in enumerate(outcomes):
            if outcome is None:  # still to come from the sender, maybe from another thread
                outcomes[index] = answers[index].wait()
        return [outcome for outcome in outcomes if outcome is not None]

    def _answering(
        self, requests: Sequence[RequestData], answers: list[OneAnswer]
    ) -> list[pb_utils.InferenceRequest]:
        """The requests for ``execute``, each one's sender writing to its answer; a sender
        freed unanswered ends its answer's wait (``OneAnswer.dropped``)."""
        triton_requests = [self._triton_request(request) for request in requests]
        for triton_request, answer in zip(triton_requests, answers, strict=True):
            triton_request._stream_to(answer)
            weakref.finalize(triton_request.get_response_sender(), answer.dropped)
        return triton_requests

    def _checked_responses(self, requests: list[pb_utils.InferenceRequest]) -> list[Any]:
        """``execute(requests)``'s list: one response (or None) per request, and None for
        each request the model rescheduled, as Triton's stub checks it."""
        responses = self._execute(requests)
        if responses is None:  # every request is answered through its sender
            return [None] * len(requests)
        if not isinstance(responses, list | tuple) or len(responses) != len(requests):
            count = len(responses) if isinstance(responses, list | tuple) else None
            raise ModelError(
                f"model {self.config.name!r}: execute() returned "
                f"{type(responses).__name__ if count is None else f'{count} responses'} for "
                f"{len(requests)} requests; expected a list of one InferenceResponse per "
                "request (or None for a request answered through its response sender)"
            )
        for request, response in zip(requests, responses, strict=True):
            if response is not None and request._release_flags & RESCHEDULE:
                raise ModelError(  # Triton's words (its spelling too), which tests compare
                    "Expected a None object in the execute function return list for "
                    f"reschduled request, found type '{type(response)}'."
                )
        return list(responses)

    def _outcome(self, response: object) -> dict[str, np.ndarray] | Exception:
        if not isinstance(response, pb_utils.InferenceResponse):
            return ModelError(
                f"model {self.config.name!r}: execute() returned a {type(response).__name__} "
                "in its list; expected pb_utils.InferenceResponse"
            )
        error = response.error()
        if error is not None:
            if isinstance(error, pb_utils.TritonError):
                return error.to_conveyor()
            return ModelError(f"model {self.config.name!r}: {error}")
        return response._outputs_dict()

    def close(self) -> None:
        try:
            finalize = getattr(self.instance, "finalize", None)
            if callable(finalize):
                finalize()
        finally:
            if self._loop is not None:
                self._loop.stop()


RESCHEDULE = pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
# Triton's words when a model that is not an iterative sequence reschedules a request.
NOT_RESCHEDULABLE = (
    "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is "
    "not configured to handle such a flag."
)
# Correlation ids for the requests of iterative sequence models that came without one: as
# Triton's iterative sequencer, each becomes a sequence of its own, starting at 1.
_iterative_ids = itertools.count(1)


def _sequence_of(request: RequestData, iterative: bool) -> tuple[int | str, int]:
    """What ``request.correlation_id()`` and ``request.flags()`` carry: the sequence id and
    Triton's start and end flags. A request of an iterative sequence model without an id
    gets one, and the start flag, as Triton's iterative sequencer gives them."""
    sequence = request.sequence
    if sequence is None:
        if iterative:
            return next(_iterative_ids), pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
        return 0, 0
    flags = (pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START if sequence.start else 0) | (
        pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END if sequence.end else 0
    )
    return sequence.id, flags


async def _awaited(awaitable: Any, caller: ModelCaller | None, model_class: type) -> Any:
    # BLS and ``import model`` from the coroutine, on the loop's thread.
    with pb_utils.calling_through(caller), running_model(model_class):
        try:
            return await awaitable
        except SystemExit as exc:
            raise _exited(model_class.__module__, exc) from exc


def _exited(model: str, exc: SystemExit) -> ModelError:
    """A model that calls sys.exit fails its requests; the instance thread lives on."""
    return ModelError(f"model {model!r}: execute raised SystemExit({exc.code!r})")


class _InstanceLoop:
    """An asyncio event loop on its own thread, for one instance's ``async def execute``.

    It runs from the first coroutine until the instance is closed, so tasks a coroutine
    creates (``asyncio.create_task``) keep running after it returns, as they do in
    Triton's stub; ``asyncio.run`` per call would cancel them when the call ends.
    """

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def stop(self, timeout: float = 5.0) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()


def load_triton_model(
    config: ModelConfig,
    version_dir: Path,
    model_class: type,
    caller: ModelCaller | None,
    instance_index: int,
) -> LoadedModel:
    """Complete the config, make this instance's TritonPythonModel and ``initialize`` it.

    On process instances (loaded in the zygote) no instance is made yet: each worker makes
    and initializes its own after its fork (:meth:`TritonProcessModel.forked`).
    """
    config = _auto_completed(config, model_class)
    if not config.outputs:  # no inputs is fine: Triton's QA models that run unittests
        raise RepositoryError(
            f"model {config.name!r}: a Triton Python model needs outputs, in its config or "
            "added by auto_complete_config"
        )
    if config.instance_kind is InstanceKind.PROCESS:
        if config.decoupled:
            raise RepositoryError(
                f"model {config.name!r}: a decoupled Triton Python model (response senders) "
                'runs on thread instances only; set instance_kind "thread"'
            )
        return TritonProcessModel(config, version_dir, model_class)
    return _initialized(config, version_dir, model_class, caller, instance_index)


def _initialized(
    config: ModelConfig,
    version_dir: Path,
    model_class: type,
    caller: ModelCaller | None,
    instance_index: int,
) -> TritonModel:
    instance = model_class()
    initialize = getattr(instance, "initialize", None)
    if callable(initialize):
        args = {
            "model_config": json.dumps(_triton_json(config)),
            "model_instance_kind": "CPU",
            "model_instance_name": f"{config.name}_0_{instance_index}",
            "model_instance_device_id": "0",
            "model_repository": str(version_dir.parent),
            "model_version": version_dir.name,
            "model_name": config.name,
        }
        with pb_utils.calling_through(caller), running_model(model_class):
            initialize(args)
    return TritonModel(config, instance, caller, version_dir.name, instance_index)


class TritonProcessModel(LoadedModel):
    """A Triton model loaded in a zygote: its class and completed config, no instance.

    Every worker forked from the zygote makes its own TritonPythonModel (``forked``) and runs
    ``initialize`` there, so each process instance has one, as each Triton instance has.
    """

    separate_requests = True
    checks_outputs = False

    def __init__(self, config: ModelConfig, version_dir: Path, model_class: type) -> None:
        self.config = config
        self._version_dir = version_dir
        self._class = model_class

    def run(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        raise ModelError(f"model {self.config.name!r}: runs in its worker processes")

    def forked(self, index: int, caller: ModelCaller | None) -> LoadedModel:
        with pb_utils_importable():
            return _initialized(self.config, self._version_dir, self._class, caller, index)


def _triton_json(config: ModelConfig) -> dict[str, Any]:
    # The same JSON GET /v2/models/{name}/config answers with.
    return triton_config_json(config, platform(config.backend), config.instance_count())


def _auto_completed(config: ModelConfig, model_class: type) -> ModelConfig:
    complete = getattr(model_class, "auto_complete_config", None)
    if not callable(complete):
        return config
    edited = complete(pb_utils.ModelConfig(_triton_json(config)))
    if not isinstance(edited, pb_utils.ModelConfig):
        raise RepositoryError(
            f"model {config.name!r}: auto_complete_config returned {type(edited).__name__}; "
            "expected the pb_utils.ModelConfig it was given"
        )
    return _read_back(config, edited.as_dict())


def _read_back(config: ModelConfig, triton: dict[str, Any]) -> ModelConfig:
    """What Conveyor serves by, from the config auto_complete_config edited."""
    max_batch_size = triton.get("max_batch_size", 0)
    batching = config.dynamic_batching
    if "dynamic_batching" in triton and batching is None:
        batching = DynamicBatching()
    if batching is not None and max_batch_size == 0:
        raise RepositoryError(
            f"model {config.name!r}: auto_complete_config set dynamic batching with "
            "max_batch_size 0; dynamic batching needs max_batch_size > 0"
        )
    return dataclasses.replace(
        config,
        max_batch_size=max_batch_size,
        dynamic_batching=batching,
        inputs=tuple(_spec(config, entry, "input") for entry in triton.get("input", [])),
        outputs=tuple(_spec(config, entry, "output") for entry in triton.get("output", [])),
        decoupled=bool(triton.get("model_transaction_policy", {}).get("decoupled", False)),
    )


def _spec(config: ModelConfig, entry: dict[str, Any], kind: str) -> TensorSpec:
    data_type = str(entry["data_type"]).removeprefix("TYPE_")
    datatype = "BYTES" if data_type == "STRING" else data_type
    try:
        pb_utils.triton_string_to_numpy(f"TYPE_{data_type}")
    except pb_utils.TritonModelException:
        raise RepositoryError(
            f"model {config.name!r}: auto_complete_config gave {kind} {entry['name']!r} "
            f"data_type {entry['data_type']!r}; expected TYPE_BOOL ... TYPE_FP64 or TYPE_STRING"
        ) from None
    return TensorSpec(
        entry["name"],
        datatype,
        tuple(int(d) for d in entry["dims"]),
        bool(entry.get("optional", False)),
    )
