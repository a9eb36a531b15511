"""What the ingress and the model replicas send each other through Ray (pickled).

A request travels as :class:`~conveyor.protocol.request.InferenceRequest`; the rest is
typed here, so neither side reads a positional tuple; a Conveyor error travels as a value in
:class:`Answer` (errors pickle with their kind and message), so the ingress raises the same
error ``conveyor serve`` would and the HTTP status is the same.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from conveyor.errors import ConveyorError
from conveyor.repository.config import ModelConfig


@dataclasses.dataclass(frozen=True)
class Answer:
    """A replica's reply: the outputs and the version that served them, or the error."""

    outputs: dict[str, np.ndarray] | None
    version: str | None
    error: ConveyorError | None = None


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """One version a replica serves, as the V2 metadata and config routes describe it
    (the config complete: inputs and outputs read from the model file if it had none)."""

    name: str
    version: int
    config: ModelConfig
    platform: str
