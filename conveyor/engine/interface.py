"""What a data plane needs of an engine, as a type: the in-process :class:`Engine` and the
Ray ingress's :class:`~conveyor.ray.facade.RemoteEngine` both implement it, and a type
checker holds each to it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from conveyor.backends.base import Destinations
    from conveyor.engine.engine import ModelInfo, RepositoryEntry
    from conveyor.engine.stats import ModelStatistics
    from conveyor.futures import InferFuture, RequestTimeline
    from conveyor.protocol.request import InferenceRequest
    from conveyor.streams import ResponseStream


class ServingEngine(Protocol):
    """Readiness, model lookups, the repository, statistics and inference."""

    @property
    def ready(self) -> bool: ...

    def failed_models(self) -> list[RepositoryEntry]: ...

    def model(self, name: str, version: int | str | None = None) -> ModelInfo: ...

    def model_versions(self, name: str) -> list[int]: ...

    def repository_index(self) -> list[RepositoryEntry]: ...

    def statistics(
        self, name: str | None = None, version: int | str | None = None
    ) -> list[ModelStatistics]: ...

    def load_model(
        self, name: str, config: str | None = None, files: Mapping[str, bytes] | None = None
    ) -> None: ...

    def unload_model(self, name: str) -> None: ...

    def submit_request(
        self,
        request: InferenceRequest,
        *,
        timeline: RequestTimeline | None = None,
        destinations: Destinations | None = None,
    ) -> InferFuture:
        """Queue ``request``; its future at once."""
        ...

    def stream_request(
        self, request: InferenceRequest, *, timeline: RequestTimeline | None = None
    ) -> ResponseStream:
        """Queue ``request``; the stream its responses arrive on, at once."""
        ...
