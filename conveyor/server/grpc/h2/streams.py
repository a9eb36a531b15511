"""A stream's states (RFC 9113 section 5.1), as a server sees them, and the moves between.

A server's stream starts with the client's HEADERS (idle -> open; END_STREAM on them takes it
straight on to half-closed (remote)). The client's END_STREAM closes its side, ours closes
ours, a reset closes both. Closed streams leave the table; a stream id at or under the
highest one opened, not in the table, is closed.
"""

from __future__ import annotations

import enum


class State(enum.Enum):
    OPEN = "open"
    HALF_CLOSED_REMOTE = "half-closed (remote)"  # the client sent END_STREAM
    HALF_CLOSED_LOCAL = "half-closed (local)"  # we sent END_STREAM
    CLOSED = "closed"


class Stream:
    """One open stream: its state, its send window (as a difference from the client's
    initial window, see :class:`.flow.SendWindows`) and DATA bytes not yet given back."""

    __slots__ = ("header_bytes", "send_delta", "state", "stream_id", "unread_credit")

    def __init__(self, stream_id: int, ended: bool) -> None:
        self.stream_id = stream_id
        self.state = State.HALF_CLOSED_REMOTE if ended else State.OPEN
        self.send_delta = 0
        self.unread_credit = 0  # DATA bytes received, not yet given back to the client
        self.header_bytes = 0  # decoded size of its request header list (HPACK's measure)

    @property
    def remote_open(self) -> bool:
        """The client may still send DATA (or trailers) on it."""
        return self.state is State.OPEN or self.state is State.HALF_CLOSED_LOCAL

    def end_remote(self) -> None:
        """The client's END_STREAM."""
        if self.state is State.OPEN:
            self.state = State.HALF_CLOSED_REMOTE
        elif self.state is State.HALF_CLOSED_LOCAL:
            self.state = State.CLOSED

    def end_local(self) -> None:
        """Our END_STREAM."""
        if self.state is State.OPEN:
            self.state = State.HALF_CLOSED_LOCAL
        elif self.state is State.HALF_CLOSED_REMOTE:
            self.state = State.CLOSED

    def reset(self) -> None:
        """RST_STREAM, either way."""
        self.state = State.CLOSED
