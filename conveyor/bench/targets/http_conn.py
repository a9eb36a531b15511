"""A lean HTTP/1.1 keep-alive client on asyncio protocols, for the generator's hot path.

A general client spends most of a small request's time in its own machinery (aiohttp:
~9,000 requests per CPU-second against a canned server, this: ~130,000); here a request
is one prebuilt bytes object written to an idle connection and the answer
is parsed by httptools (llhttp), keeping only the status and, on failure, the body. One
request at a time per connection (no pipelining), so the pool grows to the concurrency.
"""

from __future__ import annotations

import asyncio

import httptools

from conveyor.bench.targets.base import RequestFailed

_ERROR_BODY_LIMIT = 4096


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.status = 0
        self.error_body: list[bytes] | None = None
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream gets a Transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(RequestFailed(f"bad HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(ConnectionError(f"connection closed by the server{f': {exc}' if exc else ''}"))

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.error_body = [] if self.status != 200 else None

    def on_body(self, body: bytes) -> None:
        if self.error_body is not None and sum(map(len, self.error_body)) < _ERROR_BODY_LIMIT:
            self.error_body.append(body)

    def on_message_complete(self) -> None:
        if not self.parser.should_keep_alive():
            self.close()
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((self.status, b"".join(self.error_body or ())))

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter


class ConnectionPool:
    """Idle keep-alive connections to one host; opens a new one when none is idle."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()

    async def request(self, data: bytes) -> tuple[int, bytes]:
        """(status, body when the status is not 200) of one request/response exchange."""
        conn = self._idle.pop() if self._idle else await self._open()
        try:
            status, body = await conn.send(data)
        except BaseException:
            conn.close()
            self._all.discard(conn)
            raise
        if conn.closed:
            self._all.discard(conn)
        else:
            self._idle.append(conn)
        return status, body

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _transport, conn = await loop.create_connection(_Connection, self.host, self.port)
        self._all.add(conn)
        return conn

    def close(self) -> None:
        for conn in self._all:
            conn.close()
        self._all.clear()
        self._idle.clear()
