"""The HTTP front end as a bare ASGI app: read the body within limits, route, reply.

No framework: on the infer hot path a request costs one pass over its headers, one body
read, the protocol decode, the engine call and two ``send`` calls (measured against the
alternatives in bench/http_stack.py; numbers in docs/README-http.md).

Limits: the body size is checked from ``Content-Length`` before reading and again while
the body streams in (and after decompression), so no request can make the server hold
more than ``max_body_bytes`` for it.
"""

from __future__ import annotations

import zlib
from typing import Any

from conveyor.errors import InvalidInput
from conveyor.server.http.errors import error_response
from conveyor.server.http.routes import JSON, Headers, V2Routes

ASGIMessage = dict[str, Any]

_CLOSE = (b"connection", b"close")
# Only infer responses are compressed, as Triton does: tritonclient's asyncio client lets
# aiohttp send "Accept-Encoding: gzip, deflate" on every call but decompresses only infer
# responses itself. Small bodies gain nothing from compression and cost CPU.
COMPRESS_MIN_BYTES = 1024


class BodyTooLarge(InvalidInput):
    """The request body is over the limit; the rest of it is never read."""


class ClientGone(Exception):
    """The client disconnected before its body arrived."""


class HTTPApp:
    """ASGI 3 application serving the V2 routes."""

    def __init__(self, routes: V2Routes, *, max_body_bytes: int) -> None:
        self.routes = routes
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not served
        content_length = encoding = accept = header_length = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                content_length = value
            elif name == b"inference-header-content-length":
                header_length = value
            elif name == b"content-encoding":
                encoding = value
            elif name == b"accept-encoding":
                accept = value
        state = _BodyState()

        async def read_body() -> bytes:
            body = await _read_body(receive, content_length, self.max_body_bytes, state)
            if encoding is not None:
                body = _decompress(body, encoding, self.max_body_bytes)
            return body

        try:
            status, body, headers = await self.routes.handle(
                scope["method"], scope["path"], read_body, header_length
            )
        except ClientGone:
            return
        except BaseException as exc:
            if not isinstance(exc, Exception):
                raise  # cancellation and exits pass through
            status, body = error_response(exc)
            headers = list(JSON)
            if state.unread:
                # The rest of the body was never read: this connection cannot be reused.
                headers.append(_CLOSE)
        if accept is not None and len(body) >= COMPRESS_MIN_BYTES and status == 200:
            chosen = _accepted_encoding(accept) if scope["path"].endswith("/infer") else None
            if chosen is not None:
                body = _compress(body, chosen)
                headers = [*headers, (b"content-encoding", chosen)]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*headers, (b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _BodyState:
    __slots__ = ("unread",)

    def __init__(self) -> None:
        self.unread = False


async def _read_body(
    receive: Any, content_length: bytes | None, limit: int, state: _BodyState
) -> bytes:
    if content_length is not None:
        if not content_length.isdigit():
            raise InvalidInput(f"Content-Length {content_length!r} is not a number")
        declared = int(content_length)
        if declared > limit:
            state.unread = declared > 0
            raise BodyTooLarge(_too_large(f"{declared} bytes", limit))
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientGone
    body: bytes = message.get("body", b"")
    more = message.get("more_body", False)
    if not more and len(body) <= limit:
        return body
    chunks = [body]
    size = len(body)
    while True:
        if size > limit:
            # Without a Content-Length (chunked) the limit is enforced as the body arrives.
            state.unread = more
            raise BodyTooLarge(_too_large(f"more than {limit} bytes", limit))
        if not more:
            return b"".join(chunks)
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        size += len(chunk)
        chunks.append(chunk)


def _too_large(what: str, limit: int) -> str:
    return (
        f"request body is {what}; the limit is {limit} bytes "
        "(the server's --max-body-bytes setting)"
    )


def _decompress(body: bytes, encoding: bytes, limit: int) -> bytes:
    name = encoding.strip().lower()
    if name in (b"", b"identity"):
        return body
    if name in (b"gzip", b"x-gzip"):
        wbits = 31
    elif name == b"deflate":
        # "deflate" means the zlib format (RFC 9110); a raw stream is accepted too.
        zlib_header = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
        wbits = 15 if zlib_header else -15
    else:
        raise InvalidInput(
            f"Content-Encoding {encoding.decode('latin-1')!r} is not supported; "
            "use gzip, deflate or none"
        )
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise InvalidInput(f"request body is not valid {name.decode()}: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise BodyTooLarge(_too_large(f"more than {limit} bytes once decompressed", limit))
    if not inflater.eof:
        raise InvalidInput(f"request body is a truncated {name.decode()} stream")
    return out


def _accepted_encoding(accept: bytes) -> bytes | None:
    """gzip or deflate if the client accepts one (q > 0), gzip first; else None."""
    offered: dict[bytes, float] = {}
    for item in accept.lower().split(b","):
        token, _, params = item.strip().partition(b";")
        quality = 1.0
        params = params.strip()
        if params.startswith(b"q="):
            try:
                quality = float(params[2:])
            except ValueError:
                quality = 0.0
        offered[token.strip()] = quality
    for name in (b"gzip", b"deflate"):
        if offered.get(name, 0.0) > 0:
            return name
    return None


def _compress(body: bytes, encoding: bytes) -> bytes:
    # Level 1: on a tensor-sized body the fastest level gets most of the gain.
    if encoding == b"gzip":
        compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    else:
        compressor = zlib.compressobj(1, zlib.DEFLATED, 15)
    return compressor.compress(body) + compressor.flush()


__all__ = ["BodyTooLarge", "HTTPApp", "Headers"]
