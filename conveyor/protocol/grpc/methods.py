"""The ``inference.GRPCInferenceService`` method table, read from the .proto's descriptor.

Server and client both bind methods from here, so the .proto stays the single source: no
grpc stub module is generated, and a method's path, message types and streaming shape can
never disagree with the definition.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from google.protobuf import message_factory

from conveyor.protocol.grpc._generated import grpc_service_pb2

SERVICE = grpc_service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
SERVICE_NAME = SERVICE.full_name  # "inference.GRPCInferenceService"


@dataclasses.dataclass(frozen=True)
class Method:
    name: str
    path: str  # "/inference.GRPCInferenceService/ModelInfer"
    request: Any  # the request message class
    response: Any  # the response message class
    client_streaming: bool
    server_streaming: bool


METHODS: dict[str, Method] = {
    method.name: Method(
        name=method.name,
        path=f"/{SERVICE_NAME}/{method.name}",
        request=message_factory.GetMessageClass(method.input_type),
        response=message_factory.GetMessageClass(method.output_type),
        client_streaming=method.client_streaming,
        server_streaming=method.server_streaming,
    )
    for method in SERVICE.methods
}
