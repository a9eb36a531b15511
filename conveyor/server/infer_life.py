"""One infer request's life in a front end, told the same way by HTTP, gRPC, the ASGI app,
generate and the OpenAI routes: its trace (when sampled), its submission to the data plane,
its latency once answered, and the end of its trace.

A front end makes an :class:`InferLife` when a request arrives, submits through it, and
says when the answer was encoded (:meth:`InferLife.answered`), handed to the transport
(:meth:`InferLife.sent`) or failed (:meth:`InferLife.failed`); a stream says when its last
response went (:meth:`InferLife.stream_ended`). What differs between front ends stays
theirs: decoding, encoding, and how an error is worded on their wire.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.futures import InferFuture
    from conveyor.protocol.request import DecodedRequest, InferenceRequest
    from conveyor.server.dataplane import DataPlane
    from conveyor.server.generate import GenerateResponses
    from conveyor.server.tracing.trace import RequestTrace
    from conveyor.streams import ResponseStream


class InferLife:
    """One request, from arrival to its answer handed over. ``protocol``: "http" or
    "grpc" (the latency histogram's label and the trace's). ``started``: when it arrived, on
    the front end's clock; ``recv_start``: its first byte, for the trace (0: unknown)."""

    __slots__ = ("data", "future", "model", "protocol", "started", "trace")

    def __init__(
        self,
        data: DataPlane,
        protocol: str,
        model: str,
        started: float,
        traceparent: str | None = None,
        recv_start: int = 0,
    ) -> None:
        self.data = data
        self.protocol = protocol
        self.model = model
        self.started = started
        self.future: InferFuture | None = None
        trace = None
        if data.tracer.on:  # the one check tracing costs while it is off
            trace = data.begin_trace(model, protocol, traceparent)
            if trace is not None:
                trace.recv_start = recv_start
        self.trace: RequestTrace | None = trace

    def submit(self, decoded: DecodedRequest, wait_limit: float | None = None) -> InferFuture:
        """The data plane's ``infer`` of a decoded call, traced when sampled; the future at
        once. ``wait_limit``: as the data plane's (a gRPC deadline)."""
        self.future = future = self.data.infer(
            decoded.request,
            classifications=decoded.classifications,
            wait_limit=wait_limit,
            shared_memory=decoded.shared_memory,
            trace=self.trace,
        )
        return future

    def stream(self, request: InferenceRequest) -> ResponseStream:
        """The data plane's ``stream``, traced when sampled (end it with
        :meth:`stream_ended`)."""
        return self.data.stream(request, trace=self.trace)

    def generate(self, version: str | None, body: Mapping[str, Any]) -> GenerateResponses:
        """The generate extension's responses, traced when sampled (their end ends it)."""
        return self.data.generate(self.model, version, body, trace=self.trace)

    def answered(self, now: float) -> None:
        """The answer was encoded at ``now`` (the front end's clock): REQUEST_END, and the
        request's latency into the histogram."""
        trace = self.trace
        if trace is not None:
            trace.answered = time.perf_counter_ns()
        future = self.future
        if future is not None:
            self.data.observe_latency(future, now - self.started, self.protocol)

    def sending(self) -> None:
        """The answer is being handed to the transport: SEND_START."""
        if self.trace is not None:
            self.trace.send_start = time.perf_counter_ns()

    def sent(self) -> None:
        """The transport took the answer: the trace is recorded."""
        if self.trace is not None:
            self.data.finish_trace(self.trace, self.future)

    def sent_when(self, add_done_callback: Callable[[Callable[[Any], None]], None] | None) -> None:
        """:meth:`sending` now and :meth:`sent` once the call ends (gRPC: its status was
        sent), through ``add_done_callback``; now for a transport that cannot tell."""
        if self.trace is None:
            return
        self.sending()
        if add_done_callback is None:
            self.sent()
        else:
            add_done_callback(lambda _: self.sent())

    def failed(self) -> None:
        """No answer was encoded (the request or the model failed): the trace is recorded
        without REQUEST_END."""
        trace = self.trace
        if trace is not None:
            trace.answered = 0
            self.data.finish_trace(trace, self.future)

    def stream_ended(self, version: str | None, request_id: str | None, ok: bool) -> None:
        """A streamed request ended (``ok``: its last response was handed to the writer)."""
        if self.trace is not None:
            self.data.tracer.end_stream(self.trace, version, request_id, ok)
