"""How long a streamed response may wait for a client that stopped reading.

A decoupled model's responses go to the client through bounded buffers (the request's
:class:`~conveyor.streams.ResponseStream`, then the transport's window and write buffer), so
a client that stops reading makes the model's next ``send`` wait instead of growing memory.
That wait holds one of the model's instances, though: with no bound, one stalled reader
keeps the instance from every other client for as long as its connection stays open.

grpcio and Triton bound nothing here (a live peer that advertises no window is never timed
out; keepalive only finds dead ones). nginx ends a response whose client took nothing for
its ``send_timeout`` (60 s). Conveyor ends the stream after ``--stream-send-timeout``
(default 30 s: long enough for a client that pauses, e.g. through a long garbage collection,
short enough that the instance serves others within a request timeout clients commonly use;
and shorter than ``--grpc-send-timeout``, so a stream ends with this named error before the
transport's anonymous reset). Ending it closes the request's response stream: the model's
next ``send`` raises ``Cancelled`` and its instance takes other work.
"""

from __future__ import annotations

DEFAULT_STREAM_SEND_TIMEOUT_S = 30.0
OPTION = "--stream-send-timeout"


def stalled_message(seconds: float) -> str:
    """Why a stream was ended, for its client and the log."""
    return (
        f"the client took none of this stream's responses for {seconds:g} s: the server "
        f"ended the stream and cancelled its requests ({OPTION})"
    )
