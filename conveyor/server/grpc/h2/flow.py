"""HTTP/2 flow-control windows (RFC 9113 section 5.2, 6.9), both ways, for one connection.

Sending: the client's windows. Each stream's window is kept as its difference from the
client's SETTINGS_INITIAL_WINDOW_SIZE, so a change of that setting is one assignment, not a
walk over every open stream (RFC 9113 6.9.2 moves every stream's window by the change).

Receiving: bytes the client used of the windows we gave, and when to give them back.
"""

from __future__ import annotations

DEFAULT_WINDOW = 65_535
MAX_WINDOW = 2**31 - 1


class FlowControlError(Exception):
    """A window past 2**31 - 1 (RFC 9113 6.9.1): FLOW_CONTROL_ERROR."""


class SendWindows:
    """What the client lets us send: the connection's window and each stream's."""

    __slots__ = ("connection", "initial")

    def __init__(self) -> None:
        self.connection = DEFAULT_WINDOW
        self.initial = DEFAULT_WINDOW  # the client's SETTINGS_INITIAL_WINDOW_SIZE

    def stream(self, delta: int) -> int:
        """The window of a stream whose difference from the initial window is ``delta``."""
        return self.initial + delta

    def set_initial(self, value: int) -> None:
        """SETTINGS_INITIAL_WINDOW_SIZE: every stream's window moves with it, in O(1)."""
        if value > MAX_WINDOW:
            raise FlowControlError(f"SETTINGS_INITIAL_WINDOW_SIZE {value} is over 2**31 - 1")
        self.initial = value

    def grow_connection(self, increment: int) -> None:
        if self.connection + increment > MAX_WINDOW:
            raise FlowControlError("a WINDOW_UPDATE took the connection's window past 2**31 - 1")
        self.connection += increment


class ReceiveWindow:
    """The connection's receive window: DATA bytes taken, given back a quarter at a time."""

    __slots__ = ("_credit", "_size")

    def __init__(self, size: int) -> None:
        self._size = size
        self._credit = 0

    def received(self, count: int) -> int:
        """``count`` flow-controlled bytes arrived; the increment to give back now, or 0."""
        self._credit += count
        if self._credit >= self._size // 4:
            credit, self._credit = self._credit, 0
            return credit
        return 0
