"""Triton's trace extension over gRPC: the ``TraceSetting`` messages <-> the data plane,
and the gRPC side of a traced request.

A setting sent with no values clears it (as null does over HTTP); a request with no
settings only reads them. Every answer holds every setting, each a list of strings.

A unary call's GRPC_WAITREAD_START is when its headers arrived where the transport tells
(Conveyor's own: the context's ``opened``); grpcio reads and parses a message before the
handler runs, so there the earliest moment is the handler being entered, microseconds
before GRPC_WAITREAD_END. GRPC_SEND_START is the response being returned to the transport,
GRPC_SEND_END the call ending (its status sent), from the context's done callback.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb

if TYPE_CHECKING:
    from conveyor.futures import InferFuture
    from conveyor.server.dataplane import DataPlane
    from conveyor.server.grpc.errors import Context
    from conveyor.server.tracing.trace import RequestTrace


def trace_setting(data: DataPlane, request: pb.TraceSettingRequest) -> pb.TraceSettingResponse:
    model = request.model_name or None
    if request.settings:
        changes = {name: list(value.value) for name, value in request.settings.items()}
        settings = data.update_trace_settings(model, changes)
    else:
        settings = data.trace_settings(model)
    response = pb.TraceSettingResponse()
    for name, value in settings.items():
        response.settings[name].value.extend([value] if isinstance(value, str) else value)
    return response


def traceparent(context: Context) -> str | None:
    """The W3C ``traceparent`` the client sent in its metadata, if any."""
    for key, value in context.invocation_metadata() or ():
        if key == "traceparent":
            return value if isinstance(value, str) else value.decode("latin-1")
    return None


def begin_grpc_trace(
    data: DataPlane, model: str, context: Context, entered: float
) -> RequestTrace | None:
    """A trace for a request read by a handler entered at ``entered`` (perf_counter), if
    sampled. Called only while ``data.tracer.on``."""
    trace = data.begin_trace(model, "grpc", traceparent(context))
    if trace is not None:
        trace.recv_start = int(entered * 1e9)  # perf_counter and perf_counter_ns: one clock
    return trace


def finish_when_sent(
    data: DataPlane, trace: RequestTrace, future: InferFuture | None, context: Context
) -> None:
    """The response is being returned: GRPC_SEND_START now; the trace is recorded when the
    call ends (GRPC_SEND_END), or now for a context that cannot tell."""
    trace.send_start = time.perf_counter_ns()
    add_done_callback = getattr(context, "add_done_callback", None)
    if add_done_callback is None:
        data.finish_trace(trace, future)
        return
    add_done_callback(lambda _: data.finish_trace(trace, future))
