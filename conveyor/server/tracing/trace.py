"""One traced request: who it was and when each step happened (Triton's timestamp names).

Every timestamp is ``time.perf_counter_ns()``; 0 is a step that did not happen.
"""

from __future__ import annotations

from typing import Protocol

from conveyor.futures import RequestTimeline
from conveyor.server.tracing.settings import TraceSettings


class RequestTrace:
    """One sampled request's trace: who it was, and when each step happened."""

    __slots__ = (
        "answered",
        "decoded",
        "id",
        "model",
        "protocol",
        "received",
        "request_id",
        "sent",
        "settings",
        "timeline",
        "traceparent",
        "version",
    )

    def __init__(
        self,
        trace_id: int,
        model: str,
        protocol: str,
        traceparent: str | None,
        settings: TraceSettings,
        received: int,
    ) -> None:
        self.id = trace_id
        self.model = model
        self.version = ""  # the version that served it, once known
        self.request_id = ""
        self.protocol = protocol  # "http" or "grpc"
        self.traceparent = traceparent  # the client's W3C trace context, if it sent one
        self.settings = settings
        self.timeline = RequestTimeline()
        self.received = received  # the whole request is read (HTTP_RECV_END / GRPC_WAITREAD_END)
        self.decoded = 0  # decoded, about to be submitted (REQUEST_START)
        self.answered = 0  # the answer is back on the front end (REQUEST_END)
        self.sent = 0  # the response is encoded and handed to the transport (*_SEND_START)

    def timestamps(self) -> list[tuple[str, int]]:
        """Triton's timestamp names and times, in the order they happened; steps that did
        not happen (a request that failed before compute) are left out."""
        front = self.protocol.upper()
        timeline = self.timeline
        steps = [
            (f"{front}_RECV_END" if front == "HTTP" else "GRPC_WAITREAD_END", self.received),
            ("REQUEST_START", self.decoded),
            ("QUEUE_START", timeline.queue_start),
            ("COMPUTE_START", timeline.compute_start),
            ("COMPUTE_INPUT_END", timeline.compute_input_end),
            ("COMPUTE_OUTPUT_START", timeline.compute_output_start),
            ("COMPUTE_END", timeline.compute_end),
            ("REQUEST_END", self.answered),
            (f"{front}_SEND_START", self.sent),
        ]
        return [(name, ns) for name, ns in steps if ns]


class TraceSink(Protocol):
    def record(self, trace: RequestTrace) -> None: ...

    def close(self) -> None: ...
