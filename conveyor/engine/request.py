"""One queued inference request, as the scheduler and the instances see it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from conveyor.backends.base import Destinations, SequenceInfo
from conveyor.futures import InferFuture


# ModelVersion.submit builds it positionally, once per request: keep the fields' order (a
# test in tests/engine/test_request_fields.py pins it).
@dataclasses.dataclass(slots=True, eq=False)
class Request:
    inputs: dict[str, np.ndarray]
    outputs: tuple[str, ...]
    priority: int
    deadline: float | None  # on the scheduler's clock; None: no deadline
    future: InferFuture
    enqueued: float  # on the scheduler's clock
    batch_size: int = 1  # items along the batch dimension; 1 for models without one
    # Requests are batched together only when every input agrees beyond the batch dimension.
    batch_key: tuple[object, ...] = ()
    sequence: SequenceInfo | None = None  # the sequence it belongs to (stateful models)
    parameters: Mapping[str, object] | None = None  # the client's own, for the model
    # Where the caller has room for outputs (its shared-memory region): used only when this
    # request runs alone in an execution (see LoadedModel.run_into).
    destinations: Destinations | None = None
    # A traced request only (tracing's batch formation): when the dynamic batcher took it
    # into a batch being formed, on the scheduler's clock.
    taken: float = 0.0
