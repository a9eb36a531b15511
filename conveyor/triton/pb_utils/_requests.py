"""Requests and responses: what ``execute`` gets and returns, the response sender of a
decoupled model, and Business Logic Scripting (``InferenceRequest(...).exec()``), which runs
another model of the same server through the engine."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from conveyor.backends.base import SequenceInfo
from conveyor.errors import ConveyorError
from conveyor.futures import response_parameters, with_parameters
from conveyor.protocol import request as engine_request
from conveyor.triton.pb_utils._errors import TritonError, TritonModelException, unsupported
from conveyor.triton.pb_utils._tensors import PreferredMemory, Tensor

if TYPE_CHECKING:
    from conveyor.backends.base import ModelCaller, Responses
    from conveyor.streams import ResponseStream

# Triton's request flags (request.flags()), response flag (sender.send(flags=...)) and
# request release flags (request.set_release_flags), with Triton's values.
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

# The engine's submit for the model whose code runs now: set by the Python backend around
# initialize() and execute(), read by InferenceRequest.exec(). A context variable, so each
# instance thread (and an async execute's tasks) sees its own model's engine.
_caller: contextvars.ContextVar[ModelCaller | None] = contextvars.ContextVar(
    "conveyor_triton_caller", default=None
)
# A thread a model starts itself (to send a decoupled model's responses, say) inherits no
# context variable; its exec() goes through the caller last given here (the process's
# server), as in Triton, where any thread of the stub reaches the server.
_last_caller: list[ModelCaller] = []


@contextlib.contextmanager
def calling_through(caller: ModelCaller | None) -> Iterator[None]:
    """While inside, ``InferenceRequest.exec()`` submits through ``caller`` (the backend's)."""
    if caller is not None:
        _last_caller[:] = [caller]
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


def _typed(what: str, value: object, types: Any) -> None:
    """TypeError unless ``value`` is of ``types``, as Triton's typed (pybind11) arguments."""
    if not isinstance(value, types):
        raise TypeError(f"{what}: expected {types}, got {type(value).__name__} {value!r}")


def _parameters_json(
    parameters: Mapping[str, Any] | str | None, where: str, *, numbers: bool = True
) -> str:
    """The parameters as a JSON object string. Refusals are in Triton's words (its
    PyParametersToJSON), which models and tests compare; ``numbers``: floats allowed too
    (a request's parameters, which clients may send); a response's are bool/int/str only,
    as Triton's."""
    if parameters is None:
        return "{}"
    if isinstance(parameters, str):
        parameters = json.loads(parameters)
    if not isinstance(parameters, Mapping):
        raise TritonModelException(
            f"{where}: Expect dict, got {type(parameters)} (parameters must be a dict)"
        )
    values = (bool, int, float, str) if numbers else (bool, int, str)
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(
                f"Expect parameters keys to have type str, found type {type(key)}"
            )
        if not isinstance(value, values):
            kinds = "bool/int/float/str" if numbers else "bool/int/str"
            raise TritonModelException(
                f"Expect parameters values to have type {kinds}, found type {type(value)}"
            )
    return json.dumps(dict(parameters))


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    return next((t for t in request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in response.output_tensors() if t.name() == name), None)


class InferenceResponse:
    def __init__(
        self,
        output_tensors: Sequence[Tensor] = (),
        error: TritonError | None = None,
        parameters: Mapping[str, Any] | str | None = None,
    ) -> None:
        _typed("output_tensors", output_tensors, list | tuple)
        if any(tensor is None for tensor in output_tensors):  # Triton's words
            raise TritonModelException("Output tensor for inference response should not be empty.")
        self._outputs = list(output_tensors)
        self._error = error
        self._parameters = _parameters_json(parameters, "InferenceResponse", numbers=False)

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        """The response's parameters as a JSON object string, as Triton's."""
        return self._parameters

    def _outputs_dict(self) -> dict[str, Any]:
        """The engine's side: the outputs by name, carrying the response's parameters."""
        outputs = {tensor.name(): tensor.as_numpy() for tensor in self._outputs}
        return with_parameters(outputs, json.loads(self._parameters))

    @classmethod
    def _of(cls, outputs: Mapping[str, Any]) -> InferenceResponse:
        """A BLS caller's response for the engine's ``outputs`` (and their parameters)."""
        tensors = [Tensor(name, array) for name, array in outputs.items()]
        return cls(tensors, parameters=dict(response_parameters(outputs)))


class InferenceResponseSender:
    """Sends a decoupled model's responses for one request, from any thread, any time."""

    def __init__(self, responses: Responses) -> None:
        self._responses = responses

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        """Send ``response`` (if any); with ``TRITONSERVER_RESPONSE_COMPLETE_FINAL`` it is
        the last. A response with an error ends the request with that error."""
        if response is not None:
            error = response.error()
            if error is not None:
                self._responses.close(error.to_conveyor())
                return
            final = bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            self._responses.send(response._outputs_dict(), final=final)
        if flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            self._responses.close()

    def is_cancelled(self) -> bool:
        return bool(getattr(self._responses, "cancelled", False))


class InferenceTrace:
    """A request's trace context (``request.trace()``): Conveyor hands models none."""

    def get_context(self) -> str | None:
        return None


class ResponseIterator:
    """The responses of a BLS ``exec(decoupled=True)``, in the order the model sent them.

    As Triton's, the last is the response the model sent with its final flag, or an empty
    one (no outputs) when the flag came alone; a failure comes as a response whose
    ``has_error()`` is true, and ends the iteration.
    """

    def __init__(self, responses: Iterator[InferenceResponse], cancel: Any = None) -> None:
        self._responses = responses
        self._cancel = cancel
        self._ahead: list[InferenceResponse] = []

    def __iter__(self) -> ResponseIterator:
        return self

    def __next__(self) -> InferenceResponse:
        if self._ahead:
            return self._ahead.pop()
        return next(self._responses)

    def _wait_first(self) -> None:
        """Wait for the first response (Triton's exec returns its iterator after it)."""
        if not self._ahead:
            self._ahead.append(next(self._responses))

    def cancel(self) -> None:
        """Ask the model to stop, as Triton's: its ``request.is_cancelled()`` turns true, and
        what it still sends is read on (its CANCELLED error, or more responses if it takes
        no notice)."""
        if self._cancel is not None:
            self._cancel()


class InferenceRequest:
    """A request a model was given, or one it builds to call another model (BLS)."""

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: Sequence[Tensor] = (),
        requested_output_names: Sequence[str] = (),
        model_name: str | bytes | None = None,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory | None = None,
        trace: InferenceTrace | None = None,
        parameters: Mapping[str, Any] | str | None = None,
    ) -> None:
        # Triton's arguments are typed (pybind11): one of another type is a TypeError.
        _typed("request_id", request_id, str)
        _typed("correlation_id", correlation_id, int | str)
        _typed("model_version", model_version, int | str)  # the served version comes as str
        _typed("flags", flags, int)
        _typed("inputs", inputs, list | tuple)
        _typed("requested_output_names", requested_output_names, list | tuple | set)
        for name in requested_output_names:
            _typed("requested_output_names item", name, str)
        if isinstance(model_name, bytes):  # e.g. as_numpy()[0] of a BYTES input, as Triton
            model_name = model_name.decode("utf-8")
        _typed("model_name", model_name, str)
        if any(tensor is None for tensor in inputs):  # Triton's words
            raise TritonModelException(
                f"Input tensor for request with id '{request_id}' and model name "
                f"'{model_name}' should not be empty."
            )
        self._model_name: str = model_name  # type: ignore[assignment]  # checked: a str
        self._inputs = list(inputs)
        self._outputs = list(requested_output_names)
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._flags = flags
        self._timeout = timeout  # microseconds, as Triton's
        self._model_version = model_version
        self._parameters = _parameters_json(parameters, "InferenceRequest")
        self._trace = trace or InferenceTrace()
        self._sender: InferenceResponseSender | None = None
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def requested_output_names(self) -> list[str]:
        return self._outputs

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def set_flags(self, flags: int) -> None:
        self._flags = flags

    def timeout(self) -> int:
        return self._timeout

    def parameters(self) -> str:
        """The request's parameters as a JSON object string, as Triton hands them over."""
        return self._parameters

    def trace(self) -> InferenceTrace:
        return self._trace

    def is_cancelled(self) -> bool:
        return self._sender is not None and self._sender.is_cancelled()

    def set_release_flags(self, flags: int) -> None:
        """How the request is let go once ``execute`` returns: ``RELEASE_ALL`` (what happens
        anyway) or ``RELEASE_RESCHEDULE``: run it again, as Triton does for a model with
        ``sequence_batching { iterative_sequence: true }`` (the backend reads the flags)."""
        _typed("flags", flags, int)
        self._release_flags = flags

    def _rescheduled(self) -> bool:
        """The backend's side: the model asked to run this request again; the flags are
        reset, as Triton's are for the next execution (neither sequence start nor end)."""
        if not self._release_flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
            return False
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._flags = 0
        return True

    def get_response_sender(self) -> InferenceResponseSender:
        if self._sender is None:
            raise TritonModelException(
                "get_response_sender (decoupled models) is not supported for a model that is "
                "not decoupled: declare model_transaction_policy { decoupled: true } in its "
                "config.pbtxt (decoupled = true in config.toml)"
            )
        return self._sender

    def _stream_to(self, responses: Responses) -> None:
        """The backend's side: this request's responses go to ``responses``."""
        self._sender = InferenceResponseSender(responses)

    # -- Business Logic Scripting -----------------------------------------------------------

    def exec(self, decoupled: bool = False) -> InferenceResponse | ResponseIterator:
        """Run the request on its model through the engine; wait for and return the answer
        (``decoupled=True``: an iterator over the responses, as they come).

        Failures come back as a response with ``has_error()``, as in Triton, not raised.
        """
        if decoupled:
            return self._stream()
        future = self._submit()
        if isinstance(future, InferenceResponse):
            return future
        try:
            outputs = future.result()
        except ConveyorError as exc:
            return InferenceResponse(error=TritonError.from_conveyor(exc))
        return InferenceResponse._of(outputs)

    async def async_exec(self, decoupled: bool = False) -> InferenceResponse | ResponseIterator:
        """``exec`` without blocking the event loop of an ``async def execute``."""
        if decoupled:
            # As Triton's: it returns once the first response is in (waited for on a thread,
            # not blocking the event loop); the rest are read as the model iterates.
            iterator = self._stream()
            await asyncio.get_running_loop().run_in_executor(None, iterator._wait_first)
            return iterator
        future = self._submit()
        if isinstance(future, InferenceResponse):
            return future
        try:
            outputs = await asyncio.wrap_future(future)
        except ConveyorError as exc:
            return InferenceResponse(error=TritonError.from_conveyor(exc))
        return InferenceResponse._of(outputs)

    def _request(self) -> engine_request.InferenceRequest:
        """This request as the engine takes it (Triton gives its timeout in microseconds)."""
        sequence = None
        if self._correlation_id:
            sequence = SequenceInfo(
                self._correlation_id,
                start=bool(self._flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START),
                end=bool(self._flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END),
            )
        return engine_request.InferenceRequest(
            self._model_name,
            self._inputs_dict(),
            version=None if self._model_version < 0 else self._model_version,
            outputs=self._outputs or None,
            id=self._request_id or None,
            timeout=self._timeout / 1e6 if self._timeout else None,
            sequence=sequence,
            parameters=json.loads(self._parameters) if self._parameters != "{}" else None,
        )

    def _inputs_dict(self) -> dict[str, Any]:
        return {tensor.name(): tensor.as_numpy() for tensor in self._inputs}

    def _submit(self) -> Any:
        caller = _reachable()
        try:
            return caller(self._request())
        except ConveyorError as exc:  # refused before it was queued (no such model, bad input)
            return InferenceResponse(error=TritonError.from_conveyor(exc))

    def _stream(self) -> ResponseIterator:
        caller = _reachable()
        # The engine's stream, beside its submit: the backend is given the engine's bound
        # submit_request, and a process instance's caller has no stream.
        stream = getattr(getattr(caller, "__self__", None), "stream_request", None)
        if stream is None:
            raise unsupported(
                "pb_utils.InferenceRequest.exec(decoupled=True) from a process instance",
                'run the model on thread instances (instance_kind "thread")',
            )
        request = self._request()
        if request.sequence is not None:
            raise unsupported("pb_utils.InferenceRequest.exec(decoupled=True) in a sequence")
        try:
            responses = stream(request)
        except ConveyorError as exc:
            failed = InferenceResponse(error=TritonError.from_conveyor(exc))
            return ResponseIterator(iter([failed]))
        return ResponseIterator(_responses_of(responses), responses.request_cancel)


def _responses_of(stream: ResponseStream) -> Iterator[InferenceResponse]:
    try:
        for outputs in stream:
            yield InferenceResponse._of(outputs)
    except ConveyorError as exc:
        yield InferenceResponse(error=TritonError.from_conveyor(exc))
        return
    # As Triton's iterator: a model's response sent with the final flag is the last one; a
    # final flag sent alone comes as an empty response that ends the iteration.
    if not stream.ended_with_response:
        yield InferenceResponse()


def _reachable(what: str = "InferenceRequest.exec()") -> ModelCaller:
    caller = _caller.get()
    if caller is None and _last_caller:
        caller = _last_caller[0]
    if caller is None:
        raise TritonModelException(
            f"{what} works only inside initialize() or execute() of a model served by "
            "Conveyor; here no server is reachable"
        )
    return caller
