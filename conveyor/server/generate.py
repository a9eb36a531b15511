"""Triton's generate extension: a flat JSON object in, flat JSON objects out.

A request is one JSON object: each field but ``parameters`` is a model input of that name;
a string, number or bool is a one-element tensor, a flat list a tensor of its length (and
a batch dimension of 1 in front for a model that batches). ``parameters`` holds request
parameters (``priority``, ``timeout`` in microseconds, as in V2 infer).

Each response is one JSON object: ``model_name``, ``model_version``, and each output by its
name: a one-element tensor as its value, a longer one as a flat list; BYTES as text
(UTF-8, or a list of byte values when not valid UTF-8).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import numpy as np

from conveyor.errors import InvalidInput
from conveyor.futures import Outputs
from conveyor.protocol.datatypes import BYTES, numpy_dtype
from conveyor.protocol.json_codec import decode_data
from conveyor.protocol.parameters import RequestOptions, engine_priority, timeout_seconds
from conveyor.repository.config import ModelConfig
from conveyor.streams import ResponseStream

PARAMETERS = "parameters"


def generate_inputs(
    config: ModelConfig, request: Mapping[str, Any]
) -> tuple[dict[str, np.ndarray], RequestOptions]:
    """A generate request's fields as the model's input arrays, and its options."""
    specs = {spec.name: spec for spec in config.inputs}
    inputs: dict[str, np.ndarray] = {}
    for name, value in request.items():
        if name == PARAMETERS:
            continue
        spec = specs.get(name)
        if spec is None:
            raise InvalidInput(
                f"generate request field {name!r} is not an input of model {config.name!r}; "
                f"its inputs are {', '.join(specs)}"
            )
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, list | dict) or v is None for v in values):
            raise InvalidInput(
                f"generate request field {name!r} must be a string, number, bool or a flat "
                f"list of them, got {_quoted(value)}"
            )
        if spec.datatype == BYTES:
            if not all(isinstance(v, str) for v in values):
                raise InvalidInput(f"generate request field {name!r} is BYTES: expected text")
            array = np.array([v.encode("utf-8") for v in values], dtype=object)
        elif not any(isinstance(v, str) for v in values):
            # JSON numbers and bools: checked as V2 infer's JSON data is (an integer out of
            # the datatype's range, a fraction for an integer type: 400, never wrapped).
            where = f"generate request field {name!r}"
            array = decode_data(values, spec.datatype, (len(values),), where)
        else:
            try:
                array = np.array(values, dtype=numpy_dtype(spec.datatype))
            except (TypeError, ValueError, OverflowError):
                raise InvalidInput(
                    f"generate request field {name!r} must hold {spec.datatype} values, "
                    f"got {_quoted(value)}"
                ) from None
        inputs[name] = array[np.newaxis] if config.batching else array
    return inputs, _options(request.get(PARAMETERS, {}))


def _quoted(value: object) -> str:
    """A client's value for an error message, cut short (it may be megabytes)."""
    try:
        text = repr(value)
    except ValueError:  # an integer of more than 4,300 digits
        return "a number too long to quote"
    return text if len(text) <= 80 else f"{text[:80]}…"


def _options(parameters: object) -> RequestOptions:
    if not isinstance(parameters, dict):
        raise InvalidInput("generate request 'parameters' must be a JSON object")
    priority = parameters.get("priority", 0)
    timeout = parameters.get("timeout", 0)
    for key, value in (("priority", priority), ("timeout", timeout)):
        if type(value) is not int or value < 0:
            raise InvalidInput(f"generate parameter {key!r} must be an integer >= 0")
    return RequestOptions(priority=engine_priority(priority), timeout=timeout_seconds(timeout))


def response_object(model: str, version: str, outputs: Outputs) -> dict[str, Any]:
    """One response as the generate extension's JSON object."""
    answer: dict[str, Any] = {"model_name": model, "model_version": version}
    for name, array in outputs.items():
        values = [_json_value(v) for v in array.reshape(-1).tolist()]
        answer[name] = values[0] if len(values) == 1 else values
    return answer


def _json_value(value: object) -> object:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return list(value)
    return value


class GenerateResponses:
    """A request's responses as generate JSON objects, in the order they are produced."""

    def __init__(
        self,
        stream: ResponseStream,
        model: str,
        on_end: Callable[[bool], None] | None = None,
    ) -> None:
        """``on_end``: told once, when the responses end (True: all were handed over;
        False: the request failed or the client went away) - a traced request's end."""
        self._stream = stream
        self.model = model
        self.version = stream.model_version or ""
        self._on_end = on_end

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._objects()

    async def _objects(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for outputs in self._stream:
                yield response_object(self.model, self.version, outputs)
        except BaseException:
            self._end(False)
            raise
        self._end(True)

    def _end(self, ok: bool) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end(ok)

    def close(self) -> None:
        """The client went away (or got its answer): stop the model."""
        self._stream.close()
        self._end(False)  # nothing if the responses had ended already


def only_response(responses: Sequence[dict[str, Any]], model: str) -> dict[str, Any]:
    """``generate`` answers with exactly one object, as Triton's does."""
    if len(responses) != 1:
        raise InvalidInput(
            f"generate returns exactly one response, but model {model!r} sent "
            f"{len(responses)}; use generate_stream for a model that streams"
        )
    return responses[0]
