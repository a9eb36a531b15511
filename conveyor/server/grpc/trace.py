"""Triton's trace extension over gRPC: the ``TraceSetting`` messages <-> the data plane,
and the client's trace context (a traced request's life is ``server/infer_life.py``).

A setting sent with no values clears it (as null does over HTTP); a request with no
settings only reads them. Every answer holds every setting, each a list of strings.

A unary call's GRPC_WAITREAD_START is when its headers arrived where the transport tells
(Conveyor's own: the context's ``opened``); grpcio reads and parses a message before the
handler runs, so there the earliest moment is the handler being entered, microseconds
before GRPC_WAITREAD_END. GRPC_SEND_START is the response being returned to the transport,
GRPC_SEND_END the call ending (its status sent), from the context's done callback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb

if TYPE_CHECKING:
    from conveyor.server.dataplane import DataPlane
    from conveyor.server.grpc.errors import Context


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
