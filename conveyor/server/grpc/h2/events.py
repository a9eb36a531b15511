"""What the HTTP/2 core (:mod:`.core`) tells its owner a client did, one event per fact.

The core takes bytes and returns a list of these, in the order the frames arrived; the
asyncio glue (:mod:`.connection`) turns them into calls. Slotted and small: a unary call is
three of them (its headers, its message, the end of its stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conveyor.server.grpc.h2.headers import RequestHeaders

Fields = list[tuple[bytes, bytes]]


@dataclass(slots=True)
class RequestReceived:
    """A new stream's request header block, decoded (``head``: what it says to gRPC).
    ``ended``: it carried END_STREAM."""

    stream_id: int
    fields: Fields
    ended: bool
    head: RequestHeaders


@dataclass(slots=True)
class DataReceived:
    """``data[start:end]`` is the next part of the stream's DATA payload (not copied: a view
    of the bytes just read, valid until the next call into the core)."""

    stream_id: int
    data: bytes
    start: int
    end: int


@dataclass(slots=True)
class DataFrameEnded:
    """One DATA frame's payload is all in (its window credit can be given back)."""

    stream_id: int


@dataclass(slots=True)
class StreamEnded:
    """The client sent END_STREAM (on DATA or on trailers): it sends nothing more."""

    stream_id: int


@dataclass(slots=True)
class StreamReset:
    """The stream is over before its end: the client's RST_STREAM ``code``, or a stream error
    the core answered with RST_STREAM (``by_us``)."""

    stream_id: int
    code: int
    by_us: bool = False


@dataclass(slots=True)
class WindowsChanged:
    """A WINDOW_UPDATE or SETTINGS gave senders more room (or changed the frame size)."""


@dataclass(slots=True)
class DrainPingAcked:
    """The client answered the PING that followed the first GOAWAY of a drain."""


@dataclass(slots=True)
class GoAwayReceived:
    """The client is going away: finish what runs, then close."""

    code: int


@dataclass(slots=True)
class ConnectionTerminated:
    """The client broke the protocol: GOAWAY ``code`` is queued, the connection is over."""

    code: int
    why: str


Event = (
    RequestReceived
    | DataReceived
    | DataFrameEnded
    | StreamEnded
    | StreamReset
    | WindowsChanged
    | DrainPingAcked
    | GoAwayReceived
    | ConnectionTerminated
)
