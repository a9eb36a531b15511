"""uvicorn's HTTP protocols with the read timeouts of our own server (``protocol.py``).

Stock uvicorn only times out idle keep-alive connections, and only after a first response:
a client that sends nothing, or dribbles a request's head or body a byte every few
seconds, holds its connection (and, for a body, the ASGI task waiting for it) forever.
These subclasses of uvicorn's two HTTP/1.1 protocols do what ``HTTPProtocol`` does:

- the request line and headers must arrive within ``header_timeout`` of their first byte;
- a body may not stall (no new bytes) for ``body_timeout``;
- past either, the client gets 408 with a JSON error naming which, and the connection is
  closed (the app still waiting for the body is told the client left);
- a connection that never sends a byte is closed after the keep-alive timeout.

One ``call_at`` timer per connection while a request is being read. Body bytes only move
its deadline (a clock read); a timer that fires before the deadline re-arms itself. When
the server is the one not reading (uvicorn pauses reading for back-pressure and while a
pipelined request waits its turn) the client is not to blame: the timer starts over.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from conveyor.server.http.errors import error_body
from conveyor.server.http.protocol import RequestTimeout

log = logging.getLogger("conveyor.http")


class _ReadTimeouts(asyncio.Protocol):
    """The timer logic, shared by both protocols (which supply the attributes below)."""

    header_timeout: float  # set per front end by timed_protocol()
    body_timeout: float
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any  # uvicorn's RequestResponseCycle of the request read last (or None)
    server_state: Any
    timeout_keep_alive: int
    timeout_keep_alive_task: asyncio.TimerHandle | None
    timeout_keep_alive_handler: Any

    _timer: asyncio.TimerHandle | None = None
    _deadline = 0.0
    _reading: str | None = None  # "headers" or "body" while a request is being read

    # Listed first in each protocol's bases, so these run around uvicorn's own.
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # uvicorn arms its keep-alive timer only after a response; a silent new connection
        # would stay forever. data_received cancels it, as it does after a response.
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._done_reading()
        super().connection_lost(exc)

    def _expect(self, what: str) -> None:
        """The client must now send the request's ``what`` ("headers" or "body") in time."""
        self._reading = what
        timeout = self.header_timeout if what == "headers" else self.body_timeout
        self._deadline = self.loop.time() + timeout
        timer = self._timer
        if timer is not None:
            if timer.when() <= self._deadline:
                return  # fires first, sees the later deadline and re-arms
            timer.cancel()
        self._timer = self.loop.call_at(self._deadline, self._expired)

    def _body_progress(self) -> None:
        if self._reading == "body":
            self._deadline = self.loop.time() + self.body_timeout

    def _done_reading(self) -> None:
        self._reading = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        what = self._reading
        if what is None or self.transport.is_closing():
            return
        if not self.transport.is_reading():
            self._expect(what)  # we paused reading, not the client: give it a full timeout
            return
        if self.loop.time() < self._deadline:  # more of the body came meanwhile
            self._timer = self.loop.call_at(self._deadline, self._expired)
            return
        self._reading = None
        cycle = self.cycle
        if what == "headers" and cycle is not None and not cycle.response_complete:
            # The previous request is still being answered: a 408 cannot go in front of
            # its response, so close right after it.
            cycle.keep_alive = False
            return
        if what == "body" and cycle is not None and cycle.response_started:
            # The app answered without waiting for this body; stop reading the rest.
            cycle.keep_alive = False
            if cycle.response_complete:
                self.transport.close()
            return
        if cycle is not None and what == "body":
            cycle.disconnected = True  # the app waiting in receive() gets http.disconnect
            cycle.message_event.set()
        limit = self.header_timeout if what == "headers" else self.body_timeout
        log.info("closing a connection that stalled while sending its %s", what)
        body = error_body(
            f"the request was not sent in time: its {what} stalled for more than {limit:g} s",
            RequestTimeout.kind,
        )
        head = [b"HTTP/1.1 408 Request Timeout\r\n"]
        for name, value in self.server_state.default_headers:  # the Date header
            head += (name, b": ", value, b"\r\n")
        head.append(
            b"content-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n" % len(body)
        )
        self.transport.write(b"".join(head) + body)
        self.transport.close()


class HttpToolsReadTimeouts(_ReadTimeouts, HttpToolsProtocol):
    """``http="httptools"``: the parser's callbacks mark where a request is."""

    def on_message_begin(self) -> None:  # the request's first byte
        super().on_message_begin()
        self._expect("headers")

    def on_headers_complete(self) -> None:
        self._expect("body")
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._body_progress()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._done_reading()

    def handle_websocket_upgrade(self) -> None:
        self._done_reading()  # the connection now belongs to uvicorn's websocket protocol
        super().handle_websocket_upgrade()


class H11ReadTimeouts(_ReadTimeouts, H11Protocol):
    """``http="h11"``: h11 has no callbacks, so read its state after each event batch."""

    def data_received(self, data: bytes) -> None:
        if self._reading is None and self.conn.their_state is h11.IDLE:
            self._expect("headers")  # the first byte of a request
        else:
            self._body_progress()
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # a pipelined request may have been parsed (or half-parsed) now

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._done_reading()  # the connection now belongs to uvicorn's websocket protocol
        super().handle_websocket_upgrade(event)

    def _follow(self) -> None:
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._reading != "body":
                self._expect("body")
        elif state is h11.IDLE and self.conn.trailing_data[0]:  # part of the next head
            if self._reading != "headers":
                self._expect("headers")
        else:  # DONE (a whole request read), or MUST_CLOSE / CLOSED / ERROR
            self._done_reading()


_BASES: dict[str, type[Any]] = {"httptools": HttpToolsReadTimeouts, "h11": H11ReadTimeouts}


def timed_protocol(http: str, header_timeout: float, body_timeout: float) -> type[Any]:
    """The protocol class to give ``uvicorn.Config(http=...)`` for ``http`` (its name)."""
    base = _BASES[http]
    return type(
        base.__name__,
        (base,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout},
    )
