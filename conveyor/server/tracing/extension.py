"""Triton's trace extension as data-plane methods: the settings, and a trace per request.

:class:`~conveyor.server.dataplane.DataPlane` takes these methods from :class:`TraceExtension`,
so both front ends reach them the same way and the data plane module stays about inference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from conveyor.errors import ModelNotFound, Unavailable

if TYPE_CHECKING:
    from conveyor.engine.interface import ServingEngine
    from conveyor.futures import InferFuture
    from conveyor.server.tracing.settings import SettingValue
    from conveyor.server.tracing.trace import RequestTrace
    from conveyor.server.tracing.tracer import Tracer


class TraceExtension:
    """Triton's trace extension, mixed into :class:`DataPlane` (see ``tracing/``)."""

    engine: ServingEngine | None
    tracer: Tracer

    def trace_settings(self, model: str | None) -> dict[str, str | list[str]]:
        """The settings in effect for ``model`` (its own, else the global ones), or the
        global settings; every value a string, trace_level a list."""
        if model:
            self._known_model(model)
        return self.tracer.settings(model or None)

    def update_trace_settings(
        self, model: str | None, changes: Mapping[str, SettingValue]
    ) -> dict[str, str | list[str]]:
        """Change the settings named (None / empty: clear them); the settings after."""
        if model:
            self._known_model(model)
        return self.tracer.update(model or None, changes)

    def begin_trace(
        self, model: str, protocol: str, traceparent: str | None
    ) -> RequestTrace | None:
        """A trace for a request, if sampled. Front ends call it only while
        ``tracer.on``, which is the whole cost of tracing when it is off."""
        return self.tracer.begin(model, protocol, traceparent)

    def finish_trace(self, trace: RequestTrace, future: InferFuture | None) -> None:
        """The response (or error) was handed to the transport: record the trace."""
        if future is not None:
            trace.version = future.model_version or ""
            trace.request_id = future.request_id or ""
        self.tracer.finish(trace)

    def _known_model(self, name: str) -> None:
        engine = self.engine
        if engine is None:
            raise Unavailable("the server is starting: models are still loading")
        if not any(entry.name == name for entry in engine.repository_index()):
            raise ModelNotFound(f"model {name!r} is not in the repository")
