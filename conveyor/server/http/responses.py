"""HTTP/1.1 responses as bytes: one head builder, body framings, and large bodies unjoined.

Nothing here touches a socket but :func:`write_parts`, which hands parts to a transport.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from conveyor.protocol.binary import Chunk
from conveyor.server.http.routes import Headers

LARGE_BODY = 64 * 1024  # above this, head and body are written separately (no join copy)
# A streamed reply stops when this much of it waits unsent (a client that stopped reading).
STREAM_BACKLOG = 1024 * 1024
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

_REASONS = {
    200: b"OK", 400: b"Bad Request", 401: b"Unauthorized", 404: b"Not Found",
    405: b"Method Not Allowed", 408: b"Request Timeout", 500: b"Internal Server Error",
    503: b"Service Unavailable",
}  # fmt: skip
_STATUS_LINES = {code: b"HTTP/1.1 %d %s\r\n" % (code, reason) for code, reason in _REASONS.items()}


@dataclasses.dataclass(frozen=True)
class Framing:
    """How a body written as it is produced is delimited on the wire."""

    end_of_head: bytes  # the head's last header line and its blank line
    frame: Callable[[bytes], bytes]  # one chunk as written
    last_chunk: bytes  # written after the last chunk (empty: the close ends the body)
    # A client reading slower than the chunks come: True, it is cut off (the stream ends);
    # False, the writer waits for the socket to drain (a slow client slows the model).
    cuts_slow_clients: bool
    ends_on_shutdown: bool  # the server's stop ends it rather than waiting for its end


# generate_stream: chunked transfer encoding; the connection stays open for more requests.
CHUNKED = Framing(
    b"transfer-encoding: chunked\r\n\r\n",
    lambda chunk: b"%x\r\n%s\r\n" % (len(chunk), chunk),
    b"0\r\n\r\n",
    cuts_slow_clients=False,
    ends_on_shutdown=False,
)
# Dashboard events: no length, no chunking; the body ends when the connection closes.
UNTIL_CLOSE = Framing(
    b"connection: close\r\n\r\n",
    lambda chunk: chunk,
    b"",
    cuts_slow_clients=True,
    ends_on_shutdown=True,
)


def head_lines(status: int, date: bytes, headers: Headers) -> list[Chunk]:
    """The status line, the Date line and ``headers``: every response's head starts so;
    the caller adds its framing lines and the blank line."""
    head: list[Chunk] = [_STATUS_LINES.get(status) or b"HTTP/1.1 %d X\r\n" % status, date]
    for name, value in headers:
        head += (name, b": ", value, b"\r\n")
    return head


def nbytes(part: Chunk) -> int:
    return part.nbytes if isinstance(part, np.ndarray | memoryview) else len(part)


def write_parts(
    transport: asyncio.WriteTransport, head: list[Chunk], parts: Sequence[Chunk]
) -> None:
    """The head and body parts, small ones joined, large ones as they are (no copy).

    A large part goes to the transport as a memoryview: what the socket does not take at
    once stays queued as a slice of it, where a bytes object would be copied.
    """
    pending: list[Chunk] = list(head)
    for part in parts:
        if nbytes(part) < LARGE_BODY:
            pending.append(part)
            continue
        transport.write(b"".join(pending))  # type: ignore[arg-type]  # ndarray is a Buffer
        pending = []
        transport.write(memoryview(part).cast("B"))  # type: ignore[arg-type]
    if pending:
        transport.write(b"".join(pending))  # type: ignore[arg-type]
