"""The ``inference.GRPCInferenceService`` method table, read from the .proto's descriptor.

Server and client both bind methods from here, so the .proto stays the single source: no
grpc stub module is generated, and a method's path, message types and streaming shape can
never disagree with the definition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf import message_factory

from conveyor.server.grpc._generated import grpc_service_pb2

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


def generic_handler(
    implementations: dict[str, Any],
    codecs: dict[str, tuple[Callable[[bytes], Any], Callable[[Any], bytes]]] | None = None,
) -> grpc.GenericRpcHandler:
    """A handler serving ``implementations`` (method name -> coroutine or async generator).

    ``codecs`` replaces a method's (request deserializer, response serializer); by default
    they are the message classes' own. Methods of the service without an implementation are
    not registered; gRPC answers them UNIMPLEMENTED.
    """
    handlers = {}
    for name, function in implementations.items():
        method = METHODS[name]  # KeyError: not a method of the service
        deserialize, serialize = (codecs or {}).get(
            name, (method.request.FromString, method.response.SerializeToString)
        )
        kwargs = {"request_deserializer": deserialize, "response_serializer": serialize}
        if method.client_streaming and method.server_streaming:
            handlers[name] = grpc.stream_stream_rpc_method_handler(function, **kwargs)
        elif method.client_streaming or method.server_streaming:
            raise NotImplementedError(f"{name}: only unary and bidirectional methods are bound")
        else:
            handlers[name] = grpc.unary_unary_rpc_method_handler(function, **kwargs)
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)
