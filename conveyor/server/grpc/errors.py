"""Errors -> gRPC status codes: the one place where an ErrorKind becomes a gRPC status.

The gRPC twin of ``conveyor/server/http/errors.py``. A servicer method lets a ConveyorError
through; :func:`answering_errors` aborts the call with the matching status and the error's
message (cut to a size clients accept). Anything else is a bug of ours: logged with its
traceback and answered INTERNAL, and the server keeps serving.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc

from conveyor.errors import ConveyorError, ErrorKind

log = logging.getLogger("conveyor.server.grpc")

Context = grpc.aio.ServicerContext
S = TypeVar("S")

STATUS: dict[ErrorKind, grpc.StatusCode] = {
    ErrorKind.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    ErrorKind.CANCELLED: grpc.StatusCode.CANCELLED,
    ErrorKind.INTERNAL: grpc.StatusCode.INTERNAL,
    ErrorKind.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    ErrorKind.UNIMPLEMENTED: grpc.StatusCode.UNIMPLEMENTED,
    ErrorKind.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorKind.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    ErrorKind.UNKNOWN: grpc.StatusCode.UNKNOWN,
    ErrorKind.MODEL_UNSUPPORTED: grpc.StatusCode.UNIMPLEMENTED,
}

# gRPC carries the status message in a trailer, and clients refuse trailers over 16 KiB
# (the call then fails RESOURCE_EXHAUSTED, hiding the real error): messages that quote a
# huge name from the request are cut short.
MAX_DETAILS = 4096


def status_code(kind: ErrorKind) -> grpc.StatusCode:
    """The gRPC status for an error kind (queue full and shutting down are UNAVAILABLE)."""
    return STATUS[kind]


def details(message: str) -> str:
    """``message``, cut in the middle to at most about MAX_DETAILS characters."""
    if len(message) <= MAX_DETAILS:
        return message
    # Keep both ends: the start names the field, the end usually says what was expected.
    half = MAX_DETAILS // 2
    return f"{message[:half]}...({len(message) - 2 * half} characters cut)...{message[-half:]}"


def as_conveyor_error(exc: BaseException, what: str) -> ConveyorError:
    """``exc`` itself if it is a ConveyorError; else a bug: logged, and answered INTERNAL."""
    if isinstance(exc, ConveyorError):
        return exc
    log.error("gRPC %s failed unexpectedly", what, exc_info=exc)
    return ConveyorError(f"{what} failed: {type(exc).__name__}: {exc}")


async def abort(context: Context, exc: BaseException, what: str) -> NoReturn:
    """End the call with the status ``exc`` stands for (see :func:`as_conveyor_error`)."""
    error = as_conveyor_error(exc, what)
    await context.abort(status_code(error.kind), details(error.message))
    raise AssertionError("unreachable: context.abort raises")  # for the type checker


def answering_errors(
    method: Callable[[S, Any, Context], Awaitable[Any]],
) -> Callable[[S, Any, Context], Awaitable[Any]]:
    """A unary servicer method whose errors end the call with their status."""

    @functools.wraps(method)
    async def call(self: S, request: Any, context: Context) -> Any:
        try:
            return await method(self, request, context)
        except grpc.aio.AbortError:
            raise  # the method ended the call itself
        except Exception as exc:
            await abort(context, exc, method.__name__)

    return call
