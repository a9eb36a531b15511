"""The engine itself, no server: the limit every front end is held to."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from conveyor.bench.inputs import InputSpec, ModelSpec
from conveyor.bench.server_stats import StatsTotals
from conveyor.bench.targets.base import Client, Control, TargetSpec


class InProcessControl(Control):
    def __init__(self, spec: TargetSpec) -> None:
        from conveyor.engine import Engine

        self.spec = spec
        self.engine = Engine.from_repository(spec.repository)

    def describe(self) -> ModelSpec:
        info = self.engine.model(self.spec.model, self.spec.version or None)
        batching = info.config.max_batch_size > 0
        return ModelSpec(
            name=info.name,
            inputs=tuple(
                InputSpec(t.name, t.datatype, (-1, *t.shape) if batching else tuple(t.shape))
                for t in info.config.inputs
            ),
            outputs=tuple(t.name for t in info.config.outputs),
            max_batch_size=info.config.max_batch_size,
        )

    def statistics(self) -> StatsTotals | None:
        stats = self.engine.statistics(self.spec.model, self.spec.version or None)
        body = {
            "model_stats": [
                {
                    "name": s.name,
                    "version": str(s.version),
                    "inference_count": s.inference_count,
                    "execution_count": s.execution_count,
                    "inference_stats": {
                        part: {"count": getattr(s, part).count, "ns": getattr(s, part).ns}
                        for part in (
                            "success",
                            "fail",
                            "queue",
                            "compute_input",
                            "compute_infer",
                            "compute_output",
                        )
                    },
                }
                for s in stats
            ]
        }
        return StatsTotals.from_json(body, self.spec.model)

    def close(self) -> None:
        self.engine.close(timeout=30)


class InProcessClient(Client):
    def __init__(self, engine, spec: TargetSpec, inputs: Mapping[str, np.ndarray]) -> None:
        self._submit = engine.submit
        self._model = spec.model
        self._version = spec.version or None
        self._inputs = dict(inputs)

    async def infer(self) -> None:
        await self._submit(self._model, self._inputs, version=self._version)
