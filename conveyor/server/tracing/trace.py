"""One traced request: who it was and when each step happened (Triton's timestamp names).

Every timestamp is ``time.perf_counter_ns()``; 0 is a step that did not happen.
"""

from __future__ import annotations

from typing import Protocol

from conveyor.futures import RequestTimeline
from conveyor.server.tracing.settings import TraceSettings

# The front end's own timestamps, by protocol: (receive start, receive end, send start,
# send end), as Triton names them.
_FRONT_NAMES = {
    "http": ("HTTP_RECV_START", "HTTP_RECV_END", "HTTP_SEND_START", "HTTP_SEND_END"),
    "grpc": ("GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"),
}


class RequestTrace:
    """One sampled request's trace: who it was, and when each step happened."""

    __slots__ = (
        "answered",
        "decoded",
        "id",
        "model",
        "protocol",
        "received",
        "recv_start",
        "request_id",
        "send_start",
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
        self.recv_start = 0  # its first byte was read (HTTP_RECV_START / GRPC_WAITREAD_START)
        self.received = received  # the whole request is read (HTTP_RECV_END / GRPC_WAITREAD_END)
        self.decoded = 0  # decoded, about to be submitted (REQUEST_START)
        self.answered = 0  # the answer is back on the front end (REQUEST_END)
        self.send_start = 0  # the encoded response goes to the transport (*_SEND_START)
        self.sent = 0  # the transport took it, or the call ended (*_SEND_END)

    def timestamps(self) -> list[tuple[str, int]]:
        """Triton's timestamp names and times, in the order they happened; steps that did
        not happen (a request that failed before compute) are left out. A decoupled
        model's responses are each an ``INFER_RESPONSE_COMPLETE``."""
        recv_start, recv_end, send_start, send_end = _FRONT_NAMES[self.protocol]
        timeline = self.timeline
        steps = [
            (recv_start, self.recv_start),
            (recv_end, self.received),
            ("REQUEST_START", self.decoded),
            *step_timestamps(timeline),
            *(("INFER_RESPONSE_COMPLETE", ns) for ns in timeline.responses),
            ("REQUEST_END", self.answered),
            (send_start, self.send_start),
            (send_end, self.sent),
        ]
        present = [(name, ns) for name, ns in steps if ns]
        present.sort(key=lambda step: step[1])  # stable: equal times keep Triton's order
        return present


def step_timestamps(timeline: RequestTimeline) -> list[tuple[str, int]]:
    """The engine's timestamps of one request (or ensemble step), where it stamped them."""
    steps = [
        ("QUEUE_START", timeline.queue_start),
        ("COMPUTE_START", timeline.compute_start),
        ("COMPUTE_INPUT_END", timeline.compute_input_end),
        ("COMPUTE_OUTPUT_START", timeline.compute_output_start),
        ("COMPUTE_END", timeline.compute_end),
    ]
    return [(name, ns) for name, ns in steps if ns]


class TraceSink(Protocol):
    def record(self, trace: RequestTrace) -> None: ...

    def close(self) -> None: ...
