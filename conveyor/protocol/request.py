"""One inference request, in the engine's terms: the object every layer passes along.

Both front ends' decoders build it (HTTP JSON/binary bodies, gRPC ModelInferRequest), the
clients build it from ``submit``'s arguments, and it travels unchanged through the data
plane, ``Engine.submit_request``, ensembles, decoupled and sequence paths, the link to the
engine process of ``--workers`` and the Ray facade. Adding a request field is one edit here
plus its codecs.

What belongs to one call rather than to the request stays beside it as an argument: the
trace being stamped, shared-memory destinations, a stream's buffer, a caller's deadline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from conveyor.protocol.parameters import RequestOptions, wire_priority, wire_timeout
from conveyor.protocol.shared_memory import SharedMemoryUse


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceInfo:
    """Which sequence a request of a stateful model belongs to, and where in it it falls.

    A native Python model whose ``infer`` takes a ``sequence`` argument gets one of these
    (None for a request outside any sequence); ``id`` is an int or a str, as the client sent.
    """

    id: int | str
    start: bool = False
    end: bool = False


class InferenceRequest(NamedTuple):
    """One request for ``model``: its inputs and how the engine should run it.

    Immutable (a named tuple: built once per request, it costs a third of a frozen
    dataclass); ``request._replace(timeout=...)`` makes a changed copy.

    ``version``: None or "" for the model's latest. ``outputs``: the outputs wanted (None:
    all). ``priority``: higher runs first, 0 the default. ``timeout``: seconds the request
    may wait and run (None: the model's default). ``sequence``: the sequence a request of a
    stateful model belongs to. ``parameters``: the client's own parameters, handed to the
    model (a Triton model's ``request.parameters()``).
    """

    model: str
    inputs: Mapping[str, np.ndarray]
    version: int | str | None = None
    outputs: Sequence[str] | None = None
    id: str | None = None
    priority: int = 0
    timeout: float | None = None
    sequence: SequenceInfo | None = None
    parameters: Mapping[str, object] | None = None


@dataclasses.dataclass(slots=True)
class DecodedRequest:
    """What a front end's decoder reads from one infer call: the request for the engine,
    and what the data plane needs to answer it (each front end adds its own answer format)."""

    request: InferenceRequest
    # Requested outputs to answer as their top-k classes (the classification extension).
    classifications: dict[str, int] | None = None
    # Inputs and requested outputs that live in registered shared-memory regions.
    shared_memory: SharedMemoryUse = dataclasses.field(default_factory=SharedMemoryUse)


def from_options(
    model: str,
    version: str | None,
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str] | None,
    request_id: str | None,
    options: RequestOptions,
) -> InferenceRequest:
    """The request a decoder read: the wire's request parameters (``options``) become the
    request's priority, timeout, sequence and the parameters the model reads."""
    sequence = None
    if options.sequence_id is not None:
        sequence = SequenceInfo(options.sequence_id, options.sequence_start, options.sequence_end)
    return InferenceRequest(
        model,
        inputs,
        version,
        outputs,
        request_id,
        options.priority,
        options.timeout,
        sequence,
        options.custom or None,
    )


def wire_parameters(request: InferenceRequest) -> dict[str, int]:
    """The request parameters a client sends for ``request``'s priority and timeout, in the
    wire's units (see :mod:`conveyor.protocol.parameters`); empty for the defaults."""
    parameters = {}
    priority = wire_priority(request.priority)
    if priority:
        parameters["priority"] = priority
    timeout = wire_timeout(request.timeout)
    if timeout is not None:
        parameters["timeout"] = timeout
    return parameters
