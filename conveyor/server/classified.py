"""The classification extension over an engine future: the data plane's one place for it.

A request that asks for some outputs as their top-k classes runs as any other; its future
is relayed into a second future that completes with those outputs replaced by their
classes (``conveyor.protocol.classification``), so both front ends answer it unchanged.
The requested outputs are checked before the request is queued (a model's declared output
that is not numeric is refused at once), and again on the arrays the model returned.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from typing import TYPE_CHECKING

from conveyor.errors import ConveyorError
from conveyor.futures import InferFuture, Outputs
from conveyor.protocol.classification import check_classifiable, classify

if TYPE_CHECKING:
    from conveyor.repository.config import ModelConfig


class ClassificationPlan:
    """Which outputs of one request to classify, with k and labels for each."""

    __slots__ = ("batched", "counts", "labels")

    def __init__(self, config: ModelConfig, counts: Mapping[str, int]) -> None:
        declared = {spec.name: spec for spec in config.outputs}
        self.counts = dict(counts)
        self.labels: dict[str, tuple[str, ...]] = {}
        # Rows are per batch item only when the model batches, as Triton ranks them.
        self.batched = config.batching
        for name in self.counts:
            spec = declared.get(name)
            if spec is not None:  # an undeclared output is refused by the engine
                check_classifiable(name, spec.datatype)
                self.labels[name] = spec.labels

    def apply(self, outputs: Outputs) -> Outputs:
        classified = dict(outputs)
        for name, count in self.counts.items():
            if name in classified:
                classified[name] = classify(
                    classified[name], count, self.labels.get(name, ()), batched=self.batched
                )
        return classified


class _ClassifiedFuture(InferFuture):
    """Cancelling it cancels the request it relays (which succeeds only while queued)."""

    def __init__(self, source: InferFuture) -> None:
        super().__init__()
        self._source = source

    def cancel(self) -> bool:
        return self._source.cancel() and super().cancel()


def classified(source: InferFuture, plan: ClassificationPlan) -> InferFuture:
    """A future for ``source``'s outputs with ``plan`` applied."""
    future = _ClassifiedFuture(source)
    future.request_id = source.request_id
    future.model_name = source.model_name
    future.model_version = source.model_version

    def relay(done: concurrent.futures.Future[Outputs]) -> None:
        if done.cancelled():
            future.cancel()
            return
        error = done.exception()
        if future.done():  # cancelled by its caller meanwhile: nobody reads it
            return
        if error is not None:
            future.set_exception(error)
            return
        try:
            future.set_result(plan.apply(done.result()))
        except ConveyorError as exc:
            future.set_exception(exc)

    source.add_done_callback(relay)
    return future
