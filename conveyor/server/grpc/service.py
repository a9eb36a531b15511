"""Binding the service's methods to a grpc server: one generic handler over the method
table (``conveyor.protocol.grpc.methods``), with request bytes that do not parse answered
INVALID_ARGUMENT instead of grpcio's UNKNOWN.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Callable
from typing import Any, Protocol

import grpc
from google.protobuf.message import DecodeError

from conveyor.errors import InvalidInput
from conveyor.protocol.grpc.diagnose import why_unparseable
from conveyor.protocol.grpc.methods import METHODS, SERVICE_NAME
from conveyor.server.access_log import AccessLog


def unparseable(message_class: Any, error: DecodeError, data: bytes) -> InvalidInput:
    """The error for bytes that are not a valid ``message_class`` message: INVALID_ARGUMENT."""
    descriptor = message_class.DESCRIPTOR
    # upb says "Error parsing message with type 'inference.X'", with a reason in some releases
    # only; our own walk of the bytes names the field at fault whichever release is installed.
    theirs = str(error).removeprefix(f"Error parsing message with type '{descriptor.full_name}'")
    why = why_unparseable(descriptor, data) or theirs.removeprefix(": ") or "invalid protobuf"
    return InvalidInput(f"could not parse the {descriptor.name}: {why}")


def tolerant_deserializer(message_class: Any) -> Callable[[bytes], Any]:
    """``message_class.FromString`` that returns an :class:`InvalidInput` instead of raising.

    A deserializer that raises makes grpcio answer UNKNOWN ("Unexpected error deserializing")
    before any handler runs; returned, the error reaches the handler, which answers it.
    """
    parse = message_class.FromString

    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError as exc:
            return unparseable(message_class, exc, data)

    return deserialize


def _refusing_unparseable(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` behind a check: a request that could not be parsed is INVALID_ARGUMENT."""

    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, InvalidInput):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        return await function(request, context)

    return handle


def _access_logged(
    name: str, function: Callable[..., Any], access: AccessLog
) -> Callable[..., Any]:
    """``function`` writing an access line per call while ``access`` is on (one check when off)."""

    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not access.enabled:
            return await function(request, context)
        started = time.perf_counter()
        code = "OK"
        try:
            return await function(request, context)
        except grpc.aio.AbortError:
            code = _code_name(context)
            raise
        except BaseException:
            code = "UNKNOWN"
            raise
        finally:
            access.grpc(name, _model_of(request), code, time.perf_counter() - started, None)

    return handle


def _code_name(context: grpc.aio.ServicerContext) -> str:
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"


def _model_of(request: Any) -> str | None:
    """The model a request names, for the access log (None for other requests)."""
    if isinstance(request, InvalidInput):
        return None
    descriptor = request.DESCRIPTOR
    for field in ("model_name", "name"):
        if field in descriptor.fields_by_name and descriptor.name.startswith(("Model", "Repo")):
            return getattr(request, field) or None
    return None


# What a serializer returns: a message's wire bytes, or those bytes in pieces (buffers in
# order; the infer methods answer so, to send tensors without copying them).
Serialized = bytes | list[Any]
Codecs = dict[str, tuple[Callable[[bytes], Any], Callable[[Any], Serialized]]]


class Started(Protocol):
    """A unary call whose request is with the engine, answered from its future's callback
    instead of a coroutine (see :attr:`Bound.start`)."""

    @property
    def future(self) -> concurrent.futures.Future[Any]:
        """The engine's answer to the call's request."""

    def answer(self) -> Any:
        """The response once :attr:`future` is done; raises ``grpc.aio.AbortError``, the
        status set on the call's context, if the call failed."""

    def cancel(self) -> None:
        """The call ended before its answer: drop the request if it is still queued."""


# Method name -> start(request, context): a Started, or None to await the method's
# function instead; raises grpc.aio.AbortError (the status set on the context) to end the
# call at once.
Starts = dict[str, Callable[[Any, Any], Started | None]]


@dataclasses.dataclass(frozen=True)
class Bound:
    """One method ready to serve: its implementation and how its messages are read/written."""

    function: Callable[..., Any]
    deserialize: Callable[[bytes], Any]
    serialize: Callable[[Any], Serialized]
    streaming: bool  # bidirectional; otherwise unary
    # The same unary method driven by callbacks, for a transport that can (Conveyor's own
    # HTTP/2); grpcio awaits ``function``.
    start: Callable[[Any, Any], Started | None] | None = None


def bind(
    implementations: dict[str, Any],
    codecs: Codecs | None = None,
    access: AccessLog | None = None,
    starts: Starts | None = None,
) -> dict[str, Bound]:
    """Method name -> :class:`Bound`, by the rules :func:`generic_handler` documents.

    Both gRPC transports serve this table: grpcio's through :func:`generic_handler`,
    Conveyor's own (``conveyor.server.grpc.h2``) directly.
    """
    bound = {}
    for name, function in implementations.items():
        method = METHODS[name]  # KeyError: not a method of the service
        codec = (codecs or {}).get(name)
        if codec is None:
            deserialize = tolerant_deserializer(method.request)
            serialize = method.response.SerializeToString
            if not (method.client_streaming or method.server_streaming):
                function = _refusing_unparseable(function)
                if access is not None:
                    function = _access_logged(name, function, access)
        else:
            deserialize, serialize = codec
        if method.client_streaming != method.server_streaming:
            raise NotImplementedError(f"{name}: only unary and bidirectional methods are bound")
        start = (starts or {}).get(name)
        bound[name] = Bound(function, deserialize, serialize, method.client_streaming, start)
    return bound


def _joined(serialize: Callable[[Any], Serialized]) -> Callable[[Any], bytes]:
    """``serialize`` for grpcio, which takes bytes only: pieces are joined (one copy)."""

    def write(response: Any) -> bytes:
        serialized = serialize(response)
        return serialized if isinstance(serialized, bytes) else b"".join(serialized)

    return write


def generic_handler(
    implementations: dict[str, Any],
    codecs: Codecs | None = None,
    access: AccessLog | None = None,
) -> grpc.GenericRpcHandler:
    """A handler serving ``implementations`` (method name -> coroutine or async generator).

    ``codecs`` replaces a method's (request deserializer, response serializer); by default
    they are the message classes' own, except that bytes which do not parse never reach
    grpcio as an exception (it would answer UNKNOWN): a unary method is answered
    INVALID_ARGUMENT "could not parse the <request type>: <why>" without its implementation
    being called, and a streaming method's implementation receives an
    :class:`~conveyor.errors.InvalidInput` in place of the message and answers it itself. A
    method given a codec gets neither: its deserializer and implementation handle bad bytes
    (the infer methods do, so the hot path has no extra call). Methods of the service
    without an implementation are not registered; gRPC answers them UNIMPLEMENTED.

    With ``access``, each unary method without a codec writes an access line per call while
    the access log is on (the infer methods write their own, in their one try block).
    """
    handlers = {}
    for name, method in bind(implementations, codecs, access).items():
        kwargs = {
            "request_deserializer": method.deserialize,
            "response_serializer": _joined(method.serialize),
        }
        if method.streaming:
            handlers[name] = grpc.stream_stream_rpc_method_handler(method.function, **kwargs)
        else:
            handlers[name] = grpc.unary_unary_rpc_method_handler(method.function, **kwargs)
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)
