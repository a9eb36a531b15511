"""OpenAI's embeddings API on the HTTP port: ``POST /v1/embeddings``, ``GET /v1/models``.

Only translation: ``conveyor.protocol.openai`` decodes the request and encodes the answer;
the texts go to the data plane's ``infer``, the same call as a V2 infer request, so they are
batched with V2 requests, counted in statistics and latency metrics, traced, dropped when
the client goes away, and carried to the engine process under ``--workers``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from conveyor.errors import ConveyorError, ErrorKind, ModelUnavailable
from conveyor.protocol import openai
from conveyor.protocol.request import DecodedRequest, InferenceRequest
from conveyor.server.infer_life import InferLife

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from conveyor.server.dataplane import DataPlane

log = logging.getLogger("conveyor.http")

JSON = [(b"content-type", b"application/json")]
Reply = tuple[int, bytes, list[tuple[bytes, bytes]]]

# How an engine error reads in OpenAI's terms: status and error type.
_STATUS: dict[ErrorKind, tuple[int, str]] = {
    ErrorKind.INVALID_ARGUMENT: (400, "invalid_request_error"),
    ErrorKind.FAILED_PRECONDITION: (400, "invalid_request_error"),
    ErrorKind.NOT_FOUND: (404, "invalid_request_error"),
    ErrorKind.UNAVAILABLE: (503, "server_error"),
    ErrorKind.DEADLINE_EXCEEDED: (503, "server_error"),
}


def is_openai_path(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


async def handle(
    data: DataPlane, method: str, path: str, read_body: Callable[[], Awaitable[bytes]]
) -> Reply:
    """Answer one ``/v1/...`` request; every failure as OpenAI's error object."""
    try:
        if path == "/v1/embeddings":
            if method != "POST":
                return _refused(405, f"{path} takes POST, not {method}", [(b"allow", b"POST")])
            return await _embeddings(data, await read_body())
        if path == "/v1/models":
            if method != "GET":
                return _refused(405, f"{path} takes GET, not {method}", [(b"allow", b"GET")])
            return 200, openai.models_list(data.openai_models()), JSON
        if path.startswith("/v1/models/") and method == "GET":
            name = path.removeprefix("/v1/models/")
            if name not in data.openai_models():
                raise openai.model_not_found(name)
            return 200, openai.model_object(name), JSON
        return _refused(
            404,
            f"no route {method} {path}; OpenAI routes here are "
            "POST /v1/embeddings and GET /v1/models",
        )
    except openai.OpenAIError as exc:
        return exc.status, exc.body(), JSON
    except ConveyorError as exc:
        status, kind = _STATUS.get(exc.kind, (500, "server_error"))
        return status, openai.error_body(exc.message, kind), JSON


def refusal_body(exc: BaseException, status: int) -> bytes:
    """The body of a ``/v1`` request refused before its route ran (no or a wrong token, a
    body over the limit, a head that does not parse), with the status every route gets:
    OpenAI's error object, so OpenAI's clients read it as their own."""
    message = exc.message if isinstance(exc, ConveyorError) else str(exc)
    if status == 401:  # OpenAI's words for a key it does not take
        return openai.error_body(message, "invalid_request_error", code="invalid_api_key")
    return openai.error_body(message, "invalid_request_error" if status < 500 else "server_error")


def _refused(status: int, message: str, extra: list[tuple[bytes, bytes]] | None = None) -> Reply:
    return status, openai.error_body(message, "invalid_request_error"), JSON + (extra or [])


async def _embeddings(data: DataPlane, body: bytes) -> Reply:
    started = time.perf_counter()
    request = openai.decode_request(body)
    try:
        spec = data.openai_embeddings(request.model)
    except ModelUnavailable as exc:  # it failed to load: say why, as V2 infer does
        raise openai.model_not_found(request.model, exc.message) from None
    except ConveyorError as exc:
        if exc.kind is ErrorKind.NOT_FOUND:
            raise openai.model_not_found(request.model) from None
        raise
    if spec is None:
        raise openai.model_not_found(request.model)
    openai.check_request(request, spec)
    outputs = [spec.output] if spec.token_mask is None else [spec.output, spec.token_mask]
    life = InferLife(data, "http", request.model, started)
    inputs = openai.input_tensors(request, spec)
    future = life.submit(DecodedRequest(InferenceRequest(request.model, inputs, outputs=outputs)))
    try:
        results = await future
    except asyncio.CancelledError:
        future.cancel()  # the client went away while it was queued: it never runs
        life.failed()
        raise
    except Exception:
        life.failed()
        raise
    rows = openai.embeddings(request, spec, results[spec.output])
    tokens = openai.id_count(request)
    if tokens is None:
        mask = results.get(spec.token_mask) if spec.token_mask is not None else None
        tokens = openai.token_count(mask)
    reply = openai.encode_response(request, rows, tokens)
    life.answered(time.perf_counter())
    life.sending()
    life.sent()
    return 200, reply, JSON
