"""What one HTTP/2 connection may cost: the limits the core enforces, with their defaults.

Defaults follow grpcio's C core and nghttp2 (the HTTP/2 library behind most servers):
nghttp2 rate-limits incoming RST_STREAM, and other frames that cost the server work but the
client nothing ("glitches"), with a token bucket of 1,000 tokens refilled at 33 a second,
then ends the connection with GOAWAY ENHANCE_YOUR_CALM; gRPC's servers take 120 s to
complete a handshake and refuse metadata past 16 KiB.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_CONCURRENT_STREAMS = 4096
DEFAULT_MAX_HEADER_LIST_BYTES = 16 * 1024
DEFAULT_HANDSHAKE_TIMEOUT_S = 120.0
DEFAULT_IDLE_TIMEOUT_S = 0.0  # never, as grpcio's max_connection_idle
# A response that makes no progress (no window from the client) this long ends its call, as
# nginx's send_timeout (60 s) ends a response its client stopped reading.
DEFAULT_SEND_TIMEOUT_S = 60.0
# nghttp2's stream-reset and glitch rate limits: a bucket of this many, refilled per second.
BUDGET_BURST = 1000
BUDGET_RATE = 33.0


@dataclass(frozen=True, slots=True)
class Limits:
    """Per connection. ``max_header_list_bytes``: a request's headers once decoded (HPACK's
    measure: name + value + 32 a field); ``header_bytes``: the same, summed over the
    connection's open streams; timeouts in seconds, 0 for none."""

    max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS
    max_header_list_bytes: int = DEFAULT_MAX_HEADER_LIST_BYTES
    header_bytes: int = 8 * 1024 * 1024
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_S
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
    send_timeout: float = DEFAULT_SEND_TIMEOUT_S
    reset_burst: int = BUDGET_BURST
    reset_rate: float = BUDGET_RATE
    glitch_burst: int = BUDGET_BURST
    glitch_rate: float = BUDGET_RATE
    # Frames the server must answer (PING and SETTINGS ACKs, resets, refusals) queued while
    # the client does not read; past it, the connection stops reading until it does.
    induced_bytes: int = 64 * 1024


class Budget:
    """A token bucket: ``burst`` tokens, ``rate`` more a second, one spent per event."""

    __slots__ = ("_at", "_burst", "_rate", "_tokens")

    def __init__(self, burst: int, rate: float, now: float) -> None:
        self._burst = float(burst)
        self._rate = rate
        self._tokens = float(burst)
        self._at = now

    def spend(self, now: float) -> bool:
        """Take a token; False when none is left."""
        tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if tokens < 1.0:
            self._tokens = tokens
            return False
        self._tokens = tokens - 1.0
        return True
