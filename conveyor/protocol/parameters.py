"""V2 request parameters: what the wire says, in the engine's units.

The ``parameters`` object of a V2 inference request carries scheduling hints (Triton's
``schedule_policy`` extension) and binary-extension switches. This module turns them into
the engine's arguments, so HTTP and gRPC read them the same way.

Units differ on purpose and are converted only here:

- ``priority``: on the wire, Triton's levels (0 = the default, 1 = the highest level, larger
  numbers run later). In the engine, an integer where higher runs first and 0 is the
  default. The default level is level 1, as a Triton model with ``default_priority_level=1``.
- ``timeout``: microseconds on the wire (0 = none), seconds in the engine (None = none).

Sequence batching's ``sequence_id`` (an unsigned integer or a string; 0 or "" = none),
``sequence_start`` and ``sequence_end`` (booleans) are read here too; whether the model takes
sequences is the engine's question.

Unknown parameters are ignored. Reserved ones that this server does not implement
(classification of an input) are refused with a clear error rather than silently ignored,
because ignoring them would return a wrong answer.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from conveyor.errors import InvalidInput, Unsupported

# Parameters we understand, by where they appear. Documented in docs/http-api.md
# ("Parameters") and docs/grpc-api.md.
REQUEST_PARAMETERS = (
    "priority",
    "timeout",
    "binary_data_output",
    "sequence_id",
    "sequence_start",
    "sequence_end",
)
INPUT_PARAMETERS = ("binary_data_size",)
OUTPUT_PARAMETERS = ("binary_data", "classification")
# (The shared_memory_* tensor parameters are read by conveyor.protocol.shared_memory.)
UNSUPPORTED_TENSOR_PARAMETERS = ("classification",)


def engine_priority(wire: int) -> int:
    """Triton's priority level -> the engine's priority (higher runs first, 0 default).

    Levels 0 (unset) and 1 are the default; level 2 and up run after default requests.
    """
    return 0 if wire <= 1 else 1 - wire


def wire_priority(engine: int) -> int:
    """The engine's priority -> Triton's level; the inverse of :func:`engine_priority`.

    Over V2 nothing ranks above the default level, so a positive engine priority cannot
    be sent; say so rather than send something that means less.
    """
    if engine > 0:
        raise InvalidInput(
            f"priority {engine} cannot be sent over V2: the default (0) is the highest "
            "level a remote server offers; use 0 or a negative priority"
        )
    return 0 if engine == 0 else 1 - engine


def timeout_seconds(wire_us: int) -> float | None:
    """Wire timeout in microseconds (0 = none) -> engine timeout in seconds (None = none)."""
    return None if wire_us == 0 else wire_us / 1_000_000


def wire_timeout(seconds: float | None) -> int | None:
    """Engine timeout in seconds -> whole microseconds, rounded up so it never shrinks."""
    if seconds is None:
        return None
    if not seconds > 0:
        raise InvalidInput(f"timeout must be a positive number of seconds, got {seconds!r}")
    return max(1, math.ceil(seconds * 1_000_000))


@dataclasses.dataclass(frozen=True, slots=True)
class RequestOptions:
    """The request-level parameters, in engine units."""

    priority: int = 0
    timeout: float | None = None
    binary_data_output: bool = False
    # Sequence batching: None when the request belongs to no sequence.
    sequence_id: int | str | None = None
    sequence_start: bool = False
    sequence_end: bool = False
    # The parameters the server does not read itself, as sent: the model's to read
    # (a Triton model's ``request.parameters()``).
    custom: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)


DEFAULT_OPTIONS = RequestOptions()
BINARY_OUTPUT_OPTIONS = RequestOptions(binary_data_output=True)


def request_options(parameters: Any) -> RequestOptions:
    """Read a request's ``parameters`` object (or None) into :class:`RequestOptions`."""
    if parameters is None:
        return DEFAULT_OPTIONS
    if not isinstance(parameters, Mapping):
        raise InvalidInput(f"request 'parameters' must be an object, got {_kind(parameters)}")
    if not parameters:
        return DEFAULT_OPTIONS
    if len(parameters) == 1:
        # What most clients send, if anything (tritonclient, conveyor bench): no new object.
        value = parameters.get("binary_data_output")
        if value is True:
            return BINARY_OUTPUT_OPTIONS
        if value is False:
            return DEFAULT_OPTIONS
    priority = _unsigned(parameters, "priority", "request parameter")
    timeout = _unsigned(parameters, "timeout", "request parameter (microseconds)")
    binary = flag(parameters, "binary_data_output", "request parameter")
    sequence_id = _sequence_id(parameters.get("sequence_id"))
    return RequestOptions(
        engine_priority(priority),
        timeout_seconds(timeout),
        binary,
        sequence_id,
        flag(parameters, "sequence_start", "request parameter"),
        flag(parameters, "sequence_end", "request parameter"),
        {k: v for k, v in parameters.items() if k not in REQUEST_PARAMETERS},
    )


def _sequence_id(value: Any) -> int | str | None:
    """The wire's sequence id: an unsigned integer or a string; 0, "" or absent = none."""
    if value is None or value == 0 or value == "":
        if isinstance(value, bool):
            raise InvalidInput("request parameter 'sequence_id' must be an integer or a string")
        return None
    if isinstance(value, str):
        return value
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 2**64:
        raise InvalidInput(
            f"request parameter 'sequence_id' must be an unsigned 64-bit integer or a string, "
            f"got {value!r}"
        )
    return value


def check_tensor_parameters(
    parameters: Mapping[str, Any], where: str, *, output: bool = False
) -> None:
    """Refuse tensor parameters that ask for an extension we do not implement
    (classification is implemented for a requested ``output``, not for an input)."""
    for key in UNSUPPORTED_TENSOR_PARAMETERS:
        if key in parameters and not (output and key == "classification"):
            raise Unsupported(
                f"{where}: parameter {key!r} asks for classification of an input, which is "
                "not supported (it applies to requested outputs)"
            )


def classification_count(parameters: Mapping[str, Any], where: str) -> int | None:
    """A requested output's ``classification`` parameter: how many top classes to return
    (None: not asked). Triton's clients send it as an integer (gRPC ``int64_param``)."""
    if "classification" not in parameters:
        return None
    value = parameters["classification"]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(
            f"{where} parameter 'classification' must be an integer >= 1 (how many top "
            f"classes to return), got {value!r}"
        )
    return value


def flag(parameters: Mapping[str, Any], key: str, where: str) -> bool:
    value = parameters.get(key, False)
    if not isinstance(value, bool):
        raise InvalidInput(f"{where} {key!r} must be true or false, got {value!r}")
    return value


def _unsigned(parameters: Mapping[str, Any], key: str, where: str) -> int:
    value = parameters.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidInput(f"{where} {key!r} must be an integer >= 0, got {value!r}")
    return value


def _kind(value: Any) -> str:
    return type(value).__name__
