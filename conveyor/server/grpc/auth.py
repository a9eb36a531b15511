"""Bearer-token authentication for gRPC: an interceptor refusing calls without the token.

The token travels as ``authorization: Bearer <token>`` metadata (tritonclient:
``headers={"authorization": "Bearer <token>"}``). A refused call is answered
UNAUTHENTICATED before its request message is parsed: the refusing handler takes the raw
bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from conveyor.errors import Unauthenticated
from conveyor.server.auth import OPEN_GRPC_METHODS, BearerAuth


class TokenInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, auth: BearerAuth) -> None:
        self._auth = auth

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(details)
        if handler is None or details.method in OPEN_GRPC_METHODS:
            return handler
        given = None
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                given = value
                break
        try:
            self._auth.check(given)
        except Unauthenticated as exc:
            return _refusal(handler, exc.message)
        return handler


def _refusal(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same streaming shape that answers UNAUTHENTICATED."""

    async def refuse_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def refuse_stream(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # never reached: makes this an async generator, as the stream shape needs

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse_stream)
    return grpc.unary_unary_rpc_method_handler(refuse_unary)
