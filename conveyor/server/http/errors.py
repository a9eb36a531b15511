"""Errors -> HTTP status codes: the one place where an ErrorKind becomes a status.

Triton-compatible clients read only the JSON body ``{"error": "..."}``; the status tells
generic HTTP tooling what kind of failure it was.
"""

from __future__ import annotations

import logging

from conveyor.errors import ConveyorError, ErrorKind, UnaryToDecoupled
from conveyor.protocol.json_codec import dumps
from conveyor.server import openai

log = logging.getLogger("conveyor.http")

STATUS: dict[ErrorKind, int] = {
    ErrorKind.INVALID_ARGUMENT: 400,
    ErrorKind.FAILED_PRECONDITION: 400,
    # Triton answers 400 for features it does not offer (e.g. model control when disabled).
    ErrorKind.UNIMPLEMENTED: 400,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.UNAUTHENTICATED: 401,
    ErrorKind.UNAVAILABLE: 503,
    # Triton reports an expired request timeout as UNAVAILABLE; retrying later may work.
    ErrorKind.DEADLINE_EXCEEDED: 503,
    ErrorKind.INTERNAL: 500,
    # Triton's HTTP status of its error codes with no matching status (HttpCodeFromError in
    # its http_server.cc): UNKNOWN, ALREADY_EXISTS and CANCELLED are all 400.
    ErrorKind.CANCELLED: 400,
    ErrorKind.ALREADY_EXISTS: 400,
    ErrorKind.UNKNOWN: 400,
    # A model's own UNSUPPORTED: 501, as Triton's HttpCodeFromError answers it.
    ErrorKind.MODEL_UNSUPPORTED: 501,
}


def error_response(exc: BaseException, path: str = "") -> tuple[int, bytes]:
    """The status and ``{"error": ...}`` body for any exception a handler let through; on
    an OpenAI path (``/v1``), OpenAI's error object instead, whatever refused the request
    (the token check, the body limit, a head that does not parse), so OpenAI's clients
    read it as their own."""
    status, body = _v2_error(exc)
    if openai.is_openai_path(path):
        body = openai.refusal_body(exc, status)
    return status, body


def _v2_error(exc: BaseException) -> tuple[int, bytes]:
    if isinstance(exc, UnaryToDecoupled):
        exc = exc.said_by("HTTP end point")  # Triton's words for infer to a decoupled model
    if isinstance(exc, ConveyorError):
        return STATUS.get(exc.kind, 500), error_body(exc.message, exc.kind)
    # A bug of ours: answer 500, keep serving, and leave a traceback in the log.
    log.error("internal error while handling a request", exc_info=exc)
    return 500, error_body(f"internal error: {type(exc).__name__}: {exc}")


def error_body(message: str, kind: ErrorKind | None = None) -> bytes:
    """``{"error": message}``, plus ``"kind"`` so our client can raise the exact error class
    (several kinds share a status); Triton's clients read only ``"error"``."""
    if kind is None:
        return dumps({"error": message})
    return dumps({"error": message, "kind": kind.value})
