"""trace_mode opentelemetry: each traced request becomes spans, exported over OTLP.

Needs the optional extra ``conveyor[tracing]`` (opentelemetry-sdk and the OTLP exporters);
only this module imports it, and only when that mode is first used.

The spans are built once the trace ends (after the send), from the timestamps the trace
holds (so no span is open while the request runs), on a thread of their own: the event
loop only queues the finished trace. The spans: ``infer`` (the request, as the server saw
it) with the children ``receive``, ``decode``, ``queue``, ``batch_formation`` (a model
with dynamic batching), ``compute`` (itself parent of ``compute_input``, ``compute_infer``,
``compute_output``; a decoupled model's responses are its events), ``encode`` and
``send``; an ensemble's steps are children named after their models, each with its own
engine spans. A ``traceparent`` the client sent (W3C trace context) makes ``infer`` a
child of its span.

The exporter is configured the standard way: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` (``http/protobuf``,
the default, or ``grpc``), ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``; ``conveyor
serve --trace-config opentelemetry,url=...`` sets the endpoint.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conveyor.errors import InvalidInput

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from conveyor.futures import RequestTimeline
    from conveyor.server.tracing.trace import RequestTrace

EXTRA = (
    "trace_mode opentelemetry needs the OpenTelemetry SDK and OTLP exporter: "
    "pip install '.[tracing]' from a checkout of Conveyor"
)
SERVICE_NAME = "conveyor"
MAX_QUEUED = 10_000  # traces waiting for their spans; more are dropped, never held
CLOSE_TIMEOUT_S = 10.0
WALL_OFFSET_REFRESH_NS = 10_000_000_000  # follow wall-clock adjustments within 10 s
log = logging.getLogger("conveyor.server.tracing")


def require_sdk() -> None:
    """InvalidInput naming the extra when the OpenTelemetry SDK is not installed."""
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise InvalidInput(EXTRA) from None


class OTelSink:
    """Turns finished traces into spans on its own tracer provider (the process's global
    provider is left alone: an application embedding Conveyor keeps its own)."""

    def __init__(self, exporter: SpanExporter, *, batch: bool = True) -> None:
        """``batch``: build the spans on a thread of their own and export them in batches
        (the server: the event loop only queues the trace); False builds and exports each
        trace at once, on the caller's thread (tests read an in-memory exporter at once)."""
        require_sdk()
        from opentelemetry.propagators.textmap import DefaultGetter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "")})
        if not resource.attributes.get("service.name"):
            resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
        self._provider: TracerProvider = TracerProvider(resource=resource)
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer("conveyor.server")
        self._propagator = TraceContextTextMapPropagator()
        self._getter = DefaultGetter()
        self._queue: queue.Queue[RequestTrace | None] | None = None
        self._builder: threading.Thread | None = None
        self._dropped = 0
        self._to_wall = 0
        self._offset_taken = -WALL_OFFSET_REFRESH_NS - 1  # none yet
        if batch:
            self._queue = queue.Queue(MAX_QUEUED)
            self._builder = threading.Thread(
                target=self._build_queued, name="conveyor-trace-spans", daemon=True
            )
            self._builder.start()

    @classmethod
    def from_environment(cls, endpoint: str | None = None) -> OTelSink:
        """The OTLP exporter the OTEL_* variables describe; ``endpoint`` (the trace
        config's url) overrides theirs."""
        require_sdk()
        protocol = os.environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        )
        exporter: Any
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
        elif protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter as HTTPSpanExporter,
            )

            exporter = HTTPSpanExporter(endpoint=endpoint) if endpoint else HTTPSpanExporter()
        else:
            raise InvalidInput(
                f"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/protobuf or grpc, got "
                f"{protocol!r}"
            )
        return cls(exporter)

    def record(self, trace: RequestTrace) -> None:
        """Queue the trace for the span builder (or build its spans now, unbatched). Past
        MAX_QUEUED waiting traces, new ones are dropped (and counted in the log)."""
        if self._queue is None:
            self._spans(trace)
            return
        try:
            self._queue.put_nowait(trace)
        except queue.Full:
            self._dropped += 1
            if self._dropped == 1 or self._dropped % 1000 == 0:
                log.warning(
                    "%d traces dropped: spans are built slower than requests come", self._dropped
                )

    def _build_queued(self) -> None:
        assert self._queue is not None
        while (trace := self._queue.get()) is not None:
            try:
                self._spans(trace)
            except Exception:
                log.exception("the spans of trace %d could not be built", trace.id)

    def _spans(self, trace: RequestTrace) -> None:
        from opentelemetry import trace as api

        to_wall = self._wall_offset()
        parent = None
        if trace.traceparent:
            carrier: Mapping[str, str] = {"traceparent": trace.traceparent}
            parent = self._propagator.extract(carrier, getter=self._getter)
        timeline = trace.timeline
        attributes: dict[str, str | int] = {
            "model_name": trace.model,
            "model_version": trace.version,
            "request_id": trace.request_id,
            "protocol": trace.protocol,
            "trace_id": trace.id,
        }
        if timeline.computed:
            attributes["batch_size"] = timeline.batch_size
        begun = trace.recv_start or trace.received
        root = self._tracer.start_span(
            "infer",
            context=parent,
            kind=api.SpanKind.SERVER,
            start_time=begun + to_wall,
            attributes=attributes,
        )
        for name, ns in trace.timestamps():
            root.add_event(name, timestamp=ns + to_wall)
        spans = _SpanMaker(self._tracer, to_wall)
        inside = api.set_span_in_context(root)
        if trace.recv_start:
            spans.child("receive", trace.recv_start, trace.received, inside)
        if trace.decoded:
            spans.child("decode", trace.received, trace.decoded, inside)
        spans.engine_spans(timeline, inside, trace.request_id)
        if trace.answered:
            send_start = trace.send_start or trace.sent
            spans.child("encode", trace.answered, send_start, inside)
            spans.child("send", send_start, trace.sent, inside)
        else:
            root.set_status(api.Status(api.StatusCode.ERROR, "the request failed"))
        root.end(end_time=trace.sent + to_wall)

    def _wall_offset(self) -> int:
        """Monotonic ns -> wall-clock ns (spans carry wall-clock time). Taken again every
        WALL_OFFSET_REFRESH_NS, not per trace: traces built moments apart then place the
        same monotonic moment (one batch's compute start) at the same wall-clock time."""
        now = time.perf_counter_ns()
        if now - self._offset_taken > WALL_OFFSET_REFRESH_NS:
            self._to_wall = time.time_ns() - now
            self._offset_taken = now
        return self._to_wall

    def close(self) -> None:
        """Build the spans still queued, then export what is still batched."""
        if self._queue is not None and self._builder is not None:
            self._queue.put(None)
            self._builder.join(CLOSE_TIMEOUT_S)
        self._provider.shutdown()


class _SpanMaker:
    """Builds finished spans from a trace's monotonic timestamps (``to_wall`` moves them
    to wall-clock time)."""

    def __init__(self, tracer: Any, to_wall: int) -> None:
        self._tracer = tracer
        self._to_wall = to_wall

    def child(
        self,
        name: str,
        start: int,
        end: int,
        context: Any,
        attributes: Mapping[str, str | int] | None = None,
    ) -> Any:
        span = self._tracer.start_span(
            name, context=context, start_time=start + self._to_wall, attributes=attributes
        )
        span.end(end_time=end + self._to_wall)
        return span

    def engine_spans(self, timeline: RequestTimeline, context: Any, request_id: str) -> None:
        """What the engine stamped: queue, batch formation, compute (with its three
        parts), each response of a decoupled model, and each ensemble step as a span
        named after its model (its own engine spans under it)."""
        from opentelemetry import trace as api

        if timeline.queue_start and timeline.compute_start:
            queue_end = timeline.batch_start or timeline.compute_start
            self.child("queue", timeline.queue_start, queue_end, context)
            if timeline.batch_start:
                self.child(
                    "batch_formation",
                    timeline.batch_start,
                    timeline.compute_start,
                    context,
                    {"batch_size": timeline.batch_size},
                )
        if timeline.computed:
            compute = self._tracer.start_span(
                "compute",
                context=context,
                start_time=timeline.compute_start + self._to_wall,
                attributes={"batch_size": timeline.batch_size},
            )
            within = api.set_span_in_context(compute)
            if timeline.compute_input_end:  # a decoupled model's compute has no parts
                self.child(
                    "compute_input", timeline.compute_start, timeline.compute_input_end, within
                )
                self.child(
                    "compute_infer",
                    timeline.compute_input_end,
                    timeline.compute_output_start,
                    within,
                )
                self.child(
                    "compute_output", timeline.compute_output_start, timeline.compute_end, within
                )
            for ns in timeline.responses:
                compute.add_event("INFER_RESPONSE_COMPLETE", timestamp=ns + self._to_wall)
            compute.end(end_time=timeline.compute_end + self._to_wall)
        for step in timeline.steps:
            attributes: dict[str, str | int] = {
                "model_name": step.model,
                "model_version": step.version,
                "request_id": request_id,
            }
            if step.computed:
                attributes["batch_size"] = step.batch_size
            span = self._tracer.start_span(
                step.model,
                context=context,
                start_time=step.submitted + self._to_wall,
                attributes=attributes,
            )
            self.engine_spans(step, api.set_span_in_context(span), request_id)
            if not step.finished:
                span.set_status(api.Status(api.StatusCode.ERROR, "the step did not finish"))
            span.end(end_time=(step.finished or step.submitted) + self._to_wall)
