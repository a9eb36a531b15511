"""One model's Ray Serve replica: a Conveyor engine with the model (and, for an
ensemble, its steps) loaded, answering :class:`~conveyor.protocol.request.InferenceRequest`.

A plain class: ``app.py`` makes it a deployment. Each replica is its own Ray actor
process, so its engine's instances, queue, batching and statistics are its own; Ray Serve
routes requests between replicas.
"""

from __future__ import annotations

import os
from pathlib import Path

from conveyor.engine import Engine, ModelControl
from conveyor.errors import ConveyorError
from conveyor.protocol.request import InferenceRequest
from conveyor.ray.messages import Answer, ServedModel


class ModelReplica:
    def __init__(self, repository: str, model: str) -> None:
        self.model = model
        self.engine = Engine.from_repository(
            Path(repository), model_control=ModelControl.EXPLICIT, startup_models=[model]
        )
        failed = self.engine.failed_models()
        if failed:
            # Failing the constructor makes Ray Serve report the deployment unhealthy with
            # this message (``conveyor ray status``), instead of serving errors.
            reasons = "; ".join(f"{e.name}: {e.reason}" for e in failed)
            raise ConveyorError(f"model {model!r} failed to load: {reasons}")

    async def infer(self, request: InferenceRequest) -> Answer:
        try:
            future = self.engine.submit_request(request)
            outputs = await future  # the event loop stays free; instance threads compute
        except ConveyorError as exc:
            return Answer(None, None, exc)
        return Answer(outputs, future.model_version)

    def describe(self) -> list[ServedModel]:
        """Every version this replica serves, for the ingress's metadata routes."""
        return [
            ServedModel(info.name, info.version, info.config, info.platform)
            for info in (
                self.engine.model(self.model, version)
                for version in self.engine.model_versions(self.model)
            )
        ]

    def pid(self) -> int:
        """The replica's process (to watch it, or to kill it in a failure drill)."""
        return os.getpid()

    def check_health(self) -> None:
        """Ray Serve's health check: a replica whose model became unready is replaced."""
        info = self.engine.model(self.model)
        if not info.ready:
            raise ConveyorError(f"model {self.model!r} is not ready")

    def __del__(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close(timeout=5)
