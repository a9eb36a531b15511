"""Conveyor's ``triton_python_backend_utils``: the names a Triton Python model uses.

A ``model.py`` that does ``import triton_python_backend_utils as pb_utils`` gets this module
(the Python backend makes the name an alias of it when such a model loads). It follows the
behaviour of Triton's python_backend: tensors are numpy arrays on the CPU, a response
carries its request's outputs or a ``TritonError``, and ``InferenceRequest(...).exec()``
runs another model of the same server (Business Logic Scripting).

A decoupled model (``model_transaction_policy { decoupled: true }``) gets a response sender
from ``request.get_response_sender()`` and ends each request with
``TRITONSERVER_RESPONSE_COMPLETE_FINAL``, as in Triton.

Custom metrics (``MetricFamily``, ``Metric``) appear on the metrics port's ``/metrics``.

What Triton has and Conveyor does not (GPU tensors, DLPack, model control) raises
``TritonModelException`` naming the feature, never a silent no-op.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from conveyor.backends.custom_metrics import (
    CUSTOM_METRICS,
    Action,
    Kind,
    KindMismatch,
    Labels,
    Update,
)
from conveyor.errors import ConveyorError, ErrorKind, error_for_kind
from conveyor.protocol.datatypes import BYTES, datatype_of, numpy_dtype

if TYPE_CHECKING:
    from conveyor.backends.base import ModelCaller, Responses

__all__ = [
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "Logger",
    "Metric",
    "MetricFamily",
    "ModelConfig",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "numpy_to_triton_type",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
]

_log = logging.getLogger("conveyor.triton")


class TritonModelException(Exception):
    """Raised by pb_utils for a misuse or a feature Conveyor does not offer."""


def _unsupported(feature: str) -> TritonModelException:
    return TritonModelException(
        f"{feature} is not supported by Conveyor's Python backend "
        "(see docs/triton-python-models.md)"
    )


# -- errors ---------------------------------------------------------------------------------


class TritonError(Exception):
    """An error a model returns for one request (``InferenceResponse(error=...)``).

    The codes are Triton's; each becomes the Conveyor error kind Triton's status maps to,
    so the client sees the same HTTP status and gRPC code as from Triton.
    """

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        super().__init__(message)
        self._message = message
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def to_conveyor(self) -> ConveyorError:
        """The Conveyor error a client is answered with (message as given, status by code)."""
        return error_for_kind(_KIND_OF_CODE.get(self._code, ErrorKind.INTERNAL))(self._message)

    @classmethod
    def from_conveyor(cls, error: ConveyorError) -> TritonError:
        return cls(error.message, _CODE_OF_KIND.get(error.kind, cls.INTERNAL))


_KIND_OF_CODE = {
    TritonError.UNKNOWN: ErrorKind.INTERNAL,
    TritonError.INTERNAL: ErrorKind.INTERNAL,
    TritonError.NOT_FOUND: ErrorKind.NOT_FOUND,
    TritonError.INVALID_ARG: ErrorKind.INVALID_ARGUMENT,
    TritonError.UNAVAILABLE: ErrorKind.UNAVAILABLE,
    TritonError.UNSUPPORTED: ErrorKind.UNIMPLEMENTED,
    TritonError.ALREADY_EXISTS: ErrorKind.ALREADY_EXISTS,
    TritonError.CANCELLED: ErrorKind.CANCELLED,
}
_CODE_OF_KIND = {
    ErrorKind.INTERNAL: TritonError.INTERNAL,
    ErrorKind.NOT_FOUND: TritonError.NOT_FOUND,
    ErrorKind.INVALID_ARGUMENT: TritonError.INVALID_ARG,
    ErrorKind.FAILED_PRECONDITION: TritonError.INVALID_ARG,
    ErrorKind.UNAVAILABLE: TritonError.UNAVAILABLE,
    ErrorKind.DEADLINE_EXCEEDED: TritonError.UNAVAILABLE,
    ErrorKind.UNIMPLEMENTED: TritonError.UNSUPPORTED,
    ErrorKind.ALREADY_EXISTS: TritonError.ALREADY_EXISTS,
    ErrorKind.CANCELLED: TritonError.CANCELLED,
}


# -- tensors --------------------------------------------------------------------------------


class Tensor:
    """A named CPU tensor over a numpy array (BYTES: an object array of bytes)."""

    def __init__(self, name: str, array: np.ndarray) -> None:
        if not isinstance(array, np.ndarray):
            raise TritonModelException(
                f"Tensor {name!r}: expected a numpy.ndarray, got {type(array).__name__}"
            )
        self._name = name
        self._array = array

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def triton_dtype(self) -> int:
        return numpy_to_triton_type(self._array.dtype)

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self) -> Any:
        raise _unsupported("Tensor.to_dlpack (DLPack)")

    @staticmethod
    def from_dlpack(name: str, capsule: Any) -> Tensor:
        raise _unsupported("Tensor.from_dlpack (DLPack)")


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    return next((t for t in request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in response.output_tensors() if t.name() == name), None)


def get_input_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return next((e for e in model_config.get("input", []) if e.get("name") == name), None)


def get_output_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return next((e for e in model_config.get("output", []) if e.get("name") == name), None)


# Triton's TRITONSERVER_DataType numbering, which numpy_to_triton_type and friends speak.
_TRITON_TYPES = (
    "INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
    "INT64", "FP16", "FP32", "FP64", BYTES, "BF16",
)  # fmt: skip


def triton_string_to_numpy(triton_type_string: str) -> type:
    """``"TYPE_FP32"`` -> numpy.float32; ``"TYPE_STRING"`` -> numpy.object_."""
    datatype = triton_type_string.removeprefix("TYPE_")
    if datatype == "STRING":
        return np.object_
    try:
        return numpy_dtype(datatype).type
    except ConveyorError:
        raise TritonModelException(
            f"triton_string_to_numpy: {triton_type_string!r} is not a Triton data type "
            "(TYPE_BOOL ... TYPE_FP64, TYPE_STRING)"
        ) from None


def triton_to_numpy_type(data_type: int) -> type:
    if not 0 < data_type < len(_TRITON_TYPES):
        raise TritonModelException(f"triton_to_numpy_type: no Triton data type {data_type}")
    datatype = _TRITON_TYPES[data_type]
    return np.object_ if datatype == BYTES else numpy_dtype(datatype).type


def numpy_to_triton_type(data_type: Any) -> int:
    dtype = np.dtype(data_type)
    if dtype == np.object_ or dtype.kind in "SU":
        return _TRITON_TYPES.index(BYTES)
    try:
        return _TRITON_TYPES.index(datatype_of(dtype))
    except ConveyorError:
        raise TritonModelException(f"numpy_to_triton_type: {dtype} has no Triton type") from None


# -- requests and responses -----------------------------------------------------------------

# The engine's submit for the model whose code runs now: set by the Python backend around
# initialize() and execute(), read by InferenceRequest.exec(). A context variable, so each
# instance thread (and an async execute's tasks) sees its own model's engine.
_caller: contextvars.ContextVar[ModelCaller | None] = contextvars.ContextVar(
    "conveyor_triton_caller", default=None
)


@contextlib.contextmanager
def calling_through(caller: ModelCaller | None) -> Iterator[None]:
    """While inside, ``InferenceRequest.exec()`` submits through ``caller`` (the backend's)."""
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


class InferenceResponse:
    def __init__(self, output_tensors: Sequence[Tensor] = (), error: TritonError | None = None):
        self._outputs = list(output_tensors)
        self._error = error

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error


# Triton's response flag: the request's last response (``send(flags=...)``).
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1


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
            self._responses.send({t.name(): t.as_numpy() for t in response.output_tensors()})
        if flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            self._responses.close()

    def is_cancelled(self) -> bool:
        return bool(getattr(self._responses, "cancelled", False))


class InferenceRequest:
    """A request a model was given, or one it builds to call another model (BLS)."""

    def __init__(
        self,
        model_name: str,
        inputs: Sequence[Tensor] = (),
        requested_output_names: Sequence[str] = (),
        request_id: str = "",
        correlation_id: int | str = 0,
        flags: int = 0,
        timeout: int = 0,
        model_version: int = -1,
        parameters: Mapping[str, Any] | str | None = None,
        **unsupported: Any,
    ) -> None:
        if unsupported:
            raise _unsupported(f"InferenceRequest({sorted(unsupported)[0]}=...)")
        self._model_name = model_name
        self._inputs = list(inputs)
        self._outputs = list(requested_output_names)
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._flags = flags
        self._timeout = timeout  # microseconds, as Triton's
        self._model_version = model_version
        self._parameters: dict[str, Any] = (
            json.loads(parameters) if isinstance(parameters, str) else dict(parameters or {})
        )
        self._sender: InferenceResponseSender | None = None

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

    def timeout(self) -> int:
        return self._timeout

    def parameters(self) -> str:
        """The request's parameters as a JSON object string, as Triton hands them over."""
        return json.dumps(self._parameters)

    def is_cancelled(self) -> bool:
        return self._sender is not None and self._sender.is_cancelled()

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

    def exec(self, decoupled: bool = False) -> InferenceResponse:
        """Run the request on its model through the engine; wait for and return the answer.

        Failures come back as a response with ``has_error()``, as in Triton, not raised.
        """
        future = self._submit(decoupled)
        if isinstance(future, InferenceResponse):
            return future
        try:
            outputs = future.result()
        except ConveyorError as exc:
            return InferenceResponse(error=TritonError.from_conveyor(exc))
        return InferenceResponse([Tensor(name, array) for name, array in outputs.items()])

    async def async_exec(self, decoupled: bool = False) -> InferenceResponse:
        """``exec`` without blocking the event loop of an ``async def execute``."""
        future = self._submit(decoupled)
        if isinstance(future, InferenceResponse):
            return future
        try:
            outputs = await asyncio.wrap_future(future)
        except ConveyorError as exc:
            return InferenceResponse(error=TritonError.from_conveyor(exc))
        return InferenceResponse([Tensor(name, array) for name, array in outputs.items()])

    def _submit(self, decoupled: bool) -> Any:
        if decoupled:
            raise _unsupported("exec(decoupled=True) (decoupled models)")
        caller = _caller.get()
        if caller is None:
            raise TritonModelException(
                "InferenceRequest.exec() works only inside initialize() or execute() of a model "
                'on thread instances (instance_kind = "thread"); here no server is reachable'
            )
        try:
            return caller(
                self._model_name,
                {tensor.name(): tensor.as_numpy() for tensor in self._inputs},
                version=None if self._model_version < 0 else self._model_version,
                outputs=self._outputs or None,
                timeout=self._timeout / 1e6 if self._timeout else None,
                request_id=self._request_id or None,
            )
        except ConveyorError as exc:  # refused before it was queued (no such model, bad input)
            return InferenceResponse(error=TritonError.from_conveyor(exc))


# -- auto-completing a config -----------------------------------------------------------------


class ModelConfig:
    """What ``auto_complete_config`` gets: the model's config in Triton's JSON shape, to edit.

    Only what Conveyor serves a model by is read back: inputs, outputs, max_batch_size and
    dynamic batching.
    """

    def __init__(self, model_config: Mapping[str, Any] | str) -> None:
        self._config: dict[str, Any] = (
            json.loads(model_config) if isinstance(model_config, str) else dict(model_config)
        )

    def as_dict(self) -> dict[str, Any]:
        return self._config

    def set_max_batch_size(self, max_batch_size: int) -> None:
        if not isinstance(max_batch_size, int) or max_batch_size < 0:
            raise TritonModelException(
                f"set_max_batch_size: expected an integer >= 0, got {max_batch_size!r}"
            )
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        self._config.setdefault("dynamic_batching", {})

    def add_input(self, input: Mapping[str, Any]) -> None:
        self._add("input", input)

    def add_output(self, output: Mapping[str, Any]) -> None:
        self._add("output", output)

    def set_model_transaction_policy(self, policy: Mapping[str, Any]) -> None:
        self._config["model_transaction_policy"] = {"decoupled": bool(policy.get("decoupled"))}

    def _add(self, section: str, tensor: Mapping[str, Any]) -> None:
        missing = [key for key in ("name", "data_type", "dims") if key not in tensor]
        if missing:
            raise TritonModelException(
                f"add_{section}: {dict(tensor)!r} needs a {missing[0]!r} (name, data_type, dims)"
            )
        existing = self._config.setdefault(section, [])
        for entry in existing:
            if entry["name"] != tensor["name"]:
                continue
            for key in ("data_type", "dims"):
                if list(np.atleast_1d(entry[key])) != list(np.atleast_1d(tensor[key])):
                    raise TritonModelException(
                        f"add_{section}: {section} {tensor['name']!r} has {key} {entry[key]!r} "
                        f"in the config, but auto_complete_config gave {tensor[key]!r}"
                    )
            return
        existing.append(dict(tensor))


# -- custom metrics ---------------------------------------------------------------------------


class MetricFamily:
    """A named metric of one kind; ``Metric(labels)`` is one of its series.

    Families are shared by name: a second ``MetricFamily`` of the same name and kind is the
    same family (the first description stays); of another kind it raises. When every
    ``MetricFamily`` object of a name is deleted, the family leaves ``/metrics`` and its
    metrics raise on use, as in Triton.
    """

    COUNTER = Kind.COUNTER
    GAUGE = Kind.GAUGE
    HISTOGRAM = Kind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: Kind) -> None:
        if kind not in (Kind.COUNTER, Kind.GAUGE, Kind.HISTOGRAM):
            raise TritonModelException(
                f"MetricFamily {name!r}: kind {kind!r}; expected MetricFamily.COUNTER, "
                "GAUGE or HISTOGRAM"
            )
        if not isinstance(name, str) or not name or not _metric_name(name):
            raise TritonModelException(
                f"MetricFamily: name {name!r} is not a Prometheus metric name "
                "([a-zA-Z_:][a-zA-Z0-9_:]*)"
            )
        try:
            CUSTOM_METRICS.apply(Update(name, Action.HOLD, Kind(kind), str(description)))
        except KindMismatch as exc:
            raise TritonModelException(f"MetricFamily: {exc}") from None
        self._name = name
        self._kind = Kind(kind)

    def Metric(
        self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None
    ) -> Metric:
        return Metric(self._name, self._kind, labels or {}, buckets)

    def __del__(self) -> None:
        name = getattr(self, "_name", None)
        if name is not None:
            with contextlib.suppress(Exception):  # at interpreter exit the store may be gone
                CUSTOM_METRICS.apply(Update(name, Action.RELEASE))


def _metric_name(name: str) -> bool:
    head, rest = name[0], name[1:]
    return (head.isascii() and (head.isalpha() or head in "_:")) and all(
        c.isascii() and (c.isalnum() or c in "_:") for c in rest
    )


_DELETED = "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."


class Metric:
    """One series of a family: ``increment``, ``set`` (gauges), ``observe`` (histograms),
    ``value`` (counters and gauges). Metrics with the same family and labels share a value."""

    def __init__(
        self,
        family: str,
        kind: Kind,
        labels: Mapping[str, str],
        buckets: Sequence[float] | None = None,
    ) -> None:
        self._family = family
        self._kind = kind
        self._labels: Labels = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
        if kind is Kind.HISTOGRAM:
            if buckets is None:
                raise TritonModelException(
                    f"Metric of histogram family {family!r}: buckets are required "
                    "(a list of increasing upper bounds; [] for none)"
                )
            bounds = tuple(float(b) for b in buckets)
            if any(nxt <= prev for prev, nxt in itertools.pairwise(bounds)):
                raise TritonModelException(
                    f"Metric of histogram family {family!r}: buckets {list(buckets)} must be "
                    "strictly increasing"
                )
        elif buckets is not None:
            raise TritonModelException(
                f"Metric of {kind} family {family!r}: buckets are for histograms only"
            )
        else:
            bounds = None
        self._update(Action.CREATE, 0.0, bounds)

    def _update(
        self, action: Action, value: float, buckets: tuple[float, ...] | None = None
    ) -> None:
        if not CUSTOM_METRICS.alive(self._family):
            raise TritonModelException(_DELETED)
        CUSTOM_METRICS.apply(
            Update(self._family, action, self._kind, "", self._labels, value, buckets)
        )

    def increment(self, value: float) -> None:
        if self._kind is Kind.HISTOGRAM:
            raise TritonModelException(
                f"Metric of histogram family {self._family!r}: increment() is for counters "
                "and gauges; use observe()"
            )
        if self._kind is Kind.COUNTER and value < 0:
            raise TritonModelException(
                f"Metric of counter family {self._family!r}: increment({value}) must not be "
                "negative; a counter only goes up"
            )
        self._update(Action.INCREMENT, float(value))

    def set(self, value: float) -> None:
        if self._kind is not Kind.GAUGE:
            raise TritonModelException(
                f"Metric of {self._kind} family {self._family!r}: set() is for gauges only"
            )
        self._update(Action.SET, float(value))

    def observe(self, value: float) -> None:
        if self._kind is not Kind.HISTOGRAM:
            raise TritonModelException(
                f"Metric of {self._kind} family {self._family!r}: observe() is for histograms only"
            )
        self._update(Action.OBSERVE, float(value))

    def value(self) -> float:
        if self._kind is Kind.HISTOGRAM:
            raise TritonModelException(
                f"Metric of histogram family {self._family!r}: value() is for counters and "
                "gauges; a histogram is read on /metrics"
            )
        value = CUSTOM_METRICS.value(self._family, self._labels)
        if value is None:
            raise TritonModelException(_DELETED)
        return value


# -- logging and what is not offered --------------------------------------------------------


class Logger:
    """Triton's model logger: writes to Conveyor's log (logger ``conveyor.triton``)."""

    INFO, WARNING, ERROR, VERBOSE = 0, 1, 2, 3
    _LEVELS = {INFO: logging.INFO, WARNING: logging.WARNING, ERROR: logging.ERROR}

    @staticmethod
    def log(message: str, level: int = INFO) -> None:
        _log.log(Logger._LEVELS.get(level, logging.DEBUG), "%s", message)

    @staticmethod
    def log_info(message: str) -> None:
        _log.info("%s", message)

    @staticmethod
    def log_warn(message: str) -> None:
        _log.warning("%s", message)

    @staticmethod
    def log_error(message: str) -> None:
        _log.error("%s", message)

    @staticmethod
    def log_verbose(message: str) -> None:
        _log.debug("%s", message)


class _NotOffered(TritonModelException, AttributeError):
    """An AttributeError too, so ``hasattr(pb_utils, name)`` stays False rather than raising."""


def __getattr__(name: str) -> Any:
    # Triton names Conveyor leaves out fail with the feature's name, not an AttributeError
    # that reads like a typo.
    if name in _NOT_OFFERED:
        raise _NotOffered(_unsupported(f"pb_utils.{name} ({_NOT_OFFERED[name]})").args[0])
    raise AttributeError(f"module 'triton_python_backend_utils' has no attribute {name!r}")


_NOT_OFFERED = {
    "load_model": "model control from a model",
    "unload_model": "model control from a model",
    "is_model_ready": "model control from a model",
}
