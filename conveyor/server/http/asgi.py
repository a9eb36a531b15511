"""The V2 routes as a bare ASGI app, to mount Conveyor inside your own ASGI server.

``conveyor serve`` does not use it: its own front end (``connection.py``) skips ASGI
altogether and is faster. This app is for users who already run an ASGI server (uvicorn,
hypercorn, a Starlette mount) and want the V2 routes in it. No framework: a request costs
one pass over its headers, one body read, the route and two ``send`` calls. The host
server's own limits (read timeouts, backlog, keep-alive) apply, not Conveyor's.

    app = ASGIApp(V2Routes(DataPlane(engine, version=conveyor.__version__)),
                  max_body_bytes=64 << 20)
"""

from __future__ import annotations

import asyncio
from typing import Any

from conveyor.errors import MethodNotAllowed, Unauthenticated
from conveyor.server.auth import CHALLENGE, OPEN_HTTP_PATHS, BearerAuth
from conveyor.server.http import body as bodies
from conveyor.server.http.errors import error_response
from conveyor.server.http.routes import JSON, ChunkedReply, V2Routes

_CLOSE = (b"connection", b"close")


class ClientGone(Exception):
    """The client disconnected before its body arrived."""


class ASGIApp:
    """ASGI 3 application serving the V2 routes."""

    def __init__(
        self, routes: V2Routes, *, max_body_bytes: int, auth: BearerAuth | None = None
    ) -> None:
        self.routes = routes
        self.max_body_bytes = max_body_bytes
        self.auth = auth

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not served
        content_length = encoding = accept = header_length = authorization = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
            elif name == b"content-length":
                content_length = value
            elif name == b"inference-header-content-length":
                header_length = value
            elif name == b"content-encoding":
                encoding = value
            elif name == b"accept-encoding":
                accept = value
            elif name == b"transfer-encoding":
                chunked = True
        # Until read_body() has read it whole, a request's body is "unread"; answering with
        # it unread closes the connection, so the ASGI server never goes on reading (and
        # dropping) a body the routes refused or did not need, however long it is.
        state = _BodyState(chunked or content_length not in (None, b"0"))
        limit = self.max_body_bytes

        async def read_body() -> bytes:
            body = await _read_body(receive, content_length, limit, state)
            if encoding is not None:
                return bytes(bodies.decompress(body, encoding, limit))  # bytes in, bytes out
            return body

        path = scope["path"]
        try:
            if self.auth is not None and path not in OPEN_HTTP_PATHS:
                try:
                    self.auth.check(authorization)
                except Unauthenticated:
                    state.unread = True  # the body is never read: close after answering
                    raise
            reply = await self.routes.handle(scope["method"], path, read_body, header_length)
            if isinstance(reply, ChunkedReply):
                await _send_streaming(reply, send, receive)
                return
            status, body, headers = reply
        except ClientGone:
            return
        except Exception as exc:
            status, body = error_response(exc, path)
            headers = list(JSON)
            if status == 401:
                headers.append((b"www-authenticate", CHALLENGE))
            if isinstance(exc, MethodNotAllowed):
                status = 405
                headers.append((b"allow", ", ".join(exc.allow).encode()))
        if state.unread:
            # The rest of the body was never read: this connection cannot be reused.
            headers = [*headers, _CLOSE]
        body, chosen = bodies.maybe_compress(path, status, body, accept)
        if chosen is not None:
            headers = [*headers, (b"content-encoding", chosen)]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*headers, (b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def _send_streaming(reply: ChunkedReply, send: Any, receive: Any) -> None:
    """A body written as it is produced; the ASGI server chunks it.

    Hosts do not all raise from ``send`` once the client is gone (uvicorn drops the
    message), so the client's ``http.disconnect`` is awaited beside the writing: it stops
    the stream, and so the model, as ``conveyor serve`` does."""

    async def write() -> None:
        await send(
            {"type": "http.response.start", "status": reply.status, "headers": reply.headers}
        )
        async for chunk in reply.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def client_gone() -> None:
        # The request body was read whole before the reply, so what comes now is the end.
        while (await receive())["type"] != "http.disconnect":
            pass

    writing = asyncio.ensure_future(write())
    watching = asyncio.ensure_future(client_gone())
    try:
        await asyncio.wait((writing, watching), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (writing, watching):
            task.cancel()
        await asyncio.gather(writing, watching, return_exceptions=True)
        reply.close()
    if not writing.cancelled():
        writing.result()  # the writer's own error, if it had one


class _BodyState:
    __slots__ = ("unread",)

    def __init__(self, unread: bool) -> None:
        self.unread = unread


async def _read_body(
    receive: Any, content_length: bytes | None, limit: int, state: _BodyState
) -> bytes:
    try:
        bodies.declared_length(content_length, limit)
    except bodies.BodyTooLarge:
        state.unread = True
        raise
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientGone
    body: bytes = message.get("body", b"")
    more = message.get("more_body", False)
    if not more and len(body) <= limit:
        state.unread = False
        return body
    chunks = [body]
    size = len(body)
    while True:
        if size > limit:
            # Without a Content-Length (chunked) the limit is enforced as the body arrives.
            # Close after answering even if this was the last piece, as connection.py does:
            # an over-limit request never leaves its connection open for more.
            state.unread = True
            raise bodies.too_large(f"more than {limit} bytes", limit)
        if not more:
            state.unread = False
            return b"".join(chunks)
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        size += len(chunk)
        chunks.append(chunk)
