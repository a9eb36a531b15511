"""The HTTP/2 server connection without I/O: bytes in, events out, bytes to send.

In the shape of python-hyper's ``h2``: :meth:`H2Core.receive_data` takes what the socket
read and returns :mod:`.events`; the owner answers with ``send_*`` calls and writes
:meth:`H2Core.data_to_send` to the socket. Nothing here touches a socket, a loop or a clock
it was not given, so a test drives it with bytes alone.

Two departures from ``h2``, both for the cost of a large message:

- :meth:`data_to_send` returns a list of buffers, not one ``bytes``: a response's tensors
  go to ``writelines`` from their own memory.
- A DATA payload can skip the core: while :meth:`data_in_flight` names a stream and a count,
  the owner may read that many bytes straight into the stream's message buffer and report
  them with :meth:`received_directly`.

Flow-control windows are in :mod:`.flow`, stream states in :mod:`.streams`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from conveyor.server.grpc.h2 import frames as f
from conveyor.server.grpc.h2.events import (
    ConnectionTerminated,
    DataFrameEnded,
    DataReceived,
    DrainPingAcked,
    Event,
    GoAwayReceived,
    RequestReceived,
    StreamEnded,
    StreamReset,
    WindowsChanged,
)
from conveyor.server.grpc.h2.flow import MAX_WINDOW, FlowControlError, ReceiveWindow, SendWindows
from conveyor.server.grpc.h2.headers import HeaderBlockError, HeaderDecoder, HeaderListTooLarge
from conveyor.server.grpc.h2.limits import Budget, Limits
from conveyor.server.grpc.h2.streams import Stream

# What we let clients send: a large window per stream (a 4 MiB message goes in one flight)
# and for the connection; the stream's is given back as its messages are read.
STREAM_WINDOW = 16 * 1024 * 1024
CONNECTION_WINDOW = 256 * 1024 * 1024
MAX_HEADER_BLOCK = 256 * 1024  # bytes of one (compressed) header block, CONTINUATIONs included
# The largest frame clients may send: DATA as large as HTTP/2 allows (fewer frames to parse
# for a big message; their payload is never held whole), other frames (held until whole)
# no larger than a header block.
MAX_FRAME = 2**24 - 1

# Entries one SETTINGS frame may carry (nghttp2's default): more is ENHANCE_YOUR_CALM.
MAX_SETTINGS_ENTRIES = 32
RESOURCE_EXHAUSTED = 8  # the gRPC status of a call refused for its headers' size


def server_preface(limits: Limits) -> bytes:
    """Our SETTINGS (what the client may send) and the connection's receive window."""
    return f.settings(
        {
            f.SETTINGS_MAX_CONCURRENT_STREAMS: limits.max_concurrent_streams,
            f.SETTINGS_INITIAL_WINDOW_SIZE: STREAM_WINDOW,
            f.SETTINGS_MAX_HEADER_LIST_SIZE: limits.max_header_list_bytes,
            f.SETTINGS_MAX_FRAME_SIZE: MAX_FRAME,
            f.SETTINGS_ENABLE_PUSH: 0,
        }
    ) + f.window_update(0, CONNECTION_WINDOW - f.DEFAULT_WINDOW)


_END = f.END_STREAM | f.END_HEADERS
DRAIN_PING_DATA = b"draining"
_DRAIN_PING = f.frame_header(8, f.PING, 0, 0) + DRAIN_PING_DATA
_RESPONSE_HEADERS_LENGTH = len(f.RESPONSE_HEADERS)
_OK_TRAILERS_HEADER_LENGTH = len(f.OK_TRAILERS)


class ProtocolError(Exception):
    """The client broke the protocol: the connection ends with GOAWAY ``code``."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


class H2Core:
    """One server-side HTTP/2 connection's protocol state."""

    def __init__(
        self,
        wakeup: Callable[[], None] | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``wakeup``: called when output is queued on an empty queue (the owner schedules a
        write of :meth:`data_to_send`). ``clock``: seconds, for the frame budgets."""
        self._wakeup = wakeup
        self.limits = limits = limits or Limits()
        self._clock = clock
        self._output: list[Any] = []
        self._pending = b""  # an incomplete frame
        self._preface = False
        self.handshaken = False  # the client's preface and first SETTINGS arrived
        self._decoder = HeaderDecoder(limits.max_header_list_bytes)
        self.streams: dict[int, Stream] = {}
        self.last_stream = 0  # the highest stream id served (GOAWAY names it)
        self._highest = 0  # the highest stream id the client used: lower ones are closed
        self._header_bytes = 0  # decoded request headers held by the open streams
        self.send_windows = SendWindows()
        self._receive_window = ReceiveWindow(CONNECTION_WINDOW)
        self.max_frame = f.DEFAULT_MAX_FRAME  # the client's SETTINGS_MAX_FRAME_SIZE
        now = clock()
        self._resets = Budget(limits.reset_burst, limits.reset_rate, now)
        self._glitches = Budget(limits.glitch_burst, limits.glitch_rate, now)
        # While the client does not read (set by the owner): bytes of answers its own frames
        # made us queue since; past the limit the owner stops reading (see read_paused).
        self.output_blocked = False
        self.induced = 0
        # DATA frame being read: its stream (None: not an open one), bytes left, padding
        # left, END_STREAM.
        self._data_stream: Stream | None = None
        self._data_stream_id = 0
        self._data_left = 0
        self._data_padding = 0
        self._data_end = False
        # A header block being continued: its stream, flags, bytes so far.
        self._headers_stream = 0
        self._headers_flags = 0
        self._headers_block = bytearray()
        self.going_away = False  # the first GOAWAY of a drain is sent
        self.closing = False  # the final GOAWAY is sent: new streams are refused
        self.terminated = False  # a connection error: nothing more is read

    # -- output ---------------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the server's preface: its SETTINGS and the connection's window."""
        self._queue(server_preface(self.limits))

    def data_to_send(self) -> list[Any]:
        """Everything queued since the last call, as buffers for ``writelines``."""
        output = self._output
        self._output = []
        return output

    def detach(self) -> None:
        """The connection is gone: drop the owner's callback (no reference cycle is left)."""
        self._wakeup = None
        self._output = []

    @property
    def read_paused(self) -> bool:
        """The client stopped reading and keeps sending frames we must answer: stop reading
        it until it reads (a flood of PINGs queues no more than this many ACKs)."""
        return self.output_blocked and self.induced > self.limits.induced_bytes

    def _queue(self, data: Any) -> None:
        if not self._output and self._wakeup is not None:
            self._output.append(data)
            self._wakeup()
            return
        self._output.append(data)

    def _queue_all(self, parts: list[Any]) -> None:
        if not self._output and self._wakeup is not None:
            self._output += parts
            self._wakeup()
            return
        self._output += parts

    def _answer(self, data: bytes) -> None:
        """Queue a frame the client's own frame called for (an ACK, a reset, a refusal)."""
        if self.output_blocked:
            self.induced += len(data)
        self._queue(data)

    # -- receiving ------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Take bytes the client sent; return what they meant."""
        events: list[Event] = []
        if self.terminated:
            return events
        try:
            self._receive(data, events)
        except ProtocolError as exc:
            events.append(self._terminate(exc.code, str(exc)))
        return events

    def data_in_flight(self) -> tuple[Stream | None, int]:
        """The open stream whose DATA payload the next bytes are, and how many are still to
        come in its frame; (None, 0) when the next bytes are not such a payload."""
        if self._data_left and self._data_stream is not None:
            return self._data_stream, self._data_left
        return None, 0

    def received_directly(self, count: int) -> list[Event]:
        """``count`` bytes of :meth:`data_in_flight`'s payload were read by the owner."""
        self._data_left -= count
        events: list[Event] = []
        if not self._data_left and not self._data_padding:
            self._data_done(events)
        return events

    def _glitch(self, what: str) -> None:
        """A frame that costs us work and the client nothing: within a budget (nghttp2's)."""
        if not self._glitches.spend(self._clock()):
            raise ProtocolError(
                f.ENHANCE_YOUR_CALM,
                f"too many frames that do nothing ({what}): more than "
                f"{self.limits.glitch_burst}, then {self.limits.glitch_rate:g} a second",
            )

    def _receive(self, data: bytes, events: list[Event]) -> None:
        if self._pending:
            data = self._pending + data
            self._pending = b""
        position, end = 0, len(data)
        if not self._preface:
            if end < len(f.PREFACE):
                if not f.PREFACE.startswith(data):
                    raise ProtocolError(f.PROTOCOL_ERROR, "not an HTTP/2 client preface")
                self._pending = data
                return
            if not data.startswith(f.PREFACE):
                raise ProtocolError(f.PROTOCOL_ERROR, "not an HTTP/2 client preface")
            self._preface = True
            position = len(f.PREFACE)
        while position < end:
            if self.terminated:
                return
            if self._data_left or self._data_padding:
                position = self._data_payload(data, position, end, events)
                continue
            if end - position < 9:
                break
            length, kind, flags, stream_id = f.parse_header(data, position)
            if length > (MAX_FRAME if kind == f.DATA else MAX_HEADER_BLOCK):
                raise ProtocolError(f.FRAME_SIZE_ERROR, f"a frame of {length} bytes")
            if not self.handshaken and (kind != f.SETTINGS or flags & f.ACK):
                raise ProtocolError(
                    f.PROTOCOL_ERROR, "the client preface must be followed by SETTINGS"
                )
            if self._headers_stream and kind != f.CONTINUATION:
                raise ProtocolError(f.PROTOCOL_ERROR, "a header block was not continued")
            if kind == f.DATA:
                padding = 0
                start = position + 9
                if flags & f.PADDED:
                    if length < 1:
                        raise ProtocolError(f.FRAME_SIZE_ERROR, "a PADDED DATA frame of 0 bytes")
                    if end - start < 1:
                        break
                    padding = data[start]
                    start += 1
                    if padding >= length:
                        raise ProtocolError(f.PROTOCOL_ERROR, "padding longer than the frame")
                    length -= 1 + padding
                position = start
                self._data_frame(stream_id, length, padding, bool(flags & f.END_STREAM), events)
                continue
            if end - position - 9 < length:
                break
            payload = data[position + 9 : position + 9 + length]
            position += 9 + length
            self._frame(kind, flags, stream_id, payload, events)
        if position < end and not self.terminated:
            self._pending = data[position:]

    def _data_frame(
        self, stream_id: int, length: int, padding: int, end_stream: bool, events: list[Event]
    ) -> None:
        frame_size = length + padding + (1 if padding else 0)
        credit = self._receive_window.received(frame_size)
        if credit:
            self._queue(f.window_update(0, credit))
        if stream_id == 0:
            raise ProtocolError(f.PROTOCOL_ERROR, "DATA on stream 0")
        if stream_id > self._highest:
            raise ProtocolError(f.PROTOCOL_ERROR, f"DATA on stream {stream_id}, never opened")
        if frame_size == 0 and not end_stream:
            self._glitch("empty DATA")
        stream = self.streams.get(stream_id)
        if stream is not None and not stream.remote_open:
            # After the client's END_STREAM (RFC 9113 5.1): the stream is reset.
            self._reset(stream, f.STREAM_CLOSED, events)
            stream = None
        # A closed stream's DATA (one we answered early, say) is skipped: it may have been
        # in flight when our END_STREAM or RST_STREAM went out.
        if stream is not None:
            stream.unread_credit += frame_size
        self._data_stream = stream
        self._data_stream_id = stream_id
        self._data_left = length
        self._data_padding = padding
        self._data_end = end_stream
        if length == 0 and padding == 0:
            self._data_done(events)

    def _data_payload(self, data: bytes, position: int, end: int, events: list[Event]) -> int:
        if self._data_left:
            take = min(self._data_left, end - position)
            if self._data_stream is not None:
                events.append(DataReceived(self._data_stream_id, data, position, position + take))
            self._data_left -= take
            position += take
        if not self._data_left and self._data_padding:
            skip = min(self._data_padding, end - position)
            self._data_padding -= skip
            position += skip
        if not self._data_left and not self._data_padding:
            self._data_done(events)
        return position

    def _data_done(self, events: list[Event]) -> None:
        stream = self._data_stream
        self._data_stream = None
        if stream is None:
            return
        if self._data_end:
            stream.end_remote()
            events.append(StreamEnded(stream.stream_id))
        else:
            events.append(DataFrameEnded(stream.stream_id))

    def _frame(
        self, kind: int, flags: int, stream_id: int, payload: bytes, events: list[Event]
    ) -> None:
        if kind == f.HEADERS:
            if stream_id == 0 or stream_id % 2 == 0:
                raise ProtocolError(f.PROTOCOL_ERROR, f"HEADERS on stream {stream_id}")
            if flags & f.PADDED:
                if not payload:
                    raise ProtocolError(f.FRAME_SIZE_ERROR, "a PADDED HEADERS frame of 0 bytes")
                pad = payload[0]
                if pad >= len(payload):
                    raise ProtocolError(f.PROTOCOL_ERROR, "padding longer than the frame")
                payload = payload[1 : len(payload) - pad]
            if flags & f.PRIORITY_FLAG:
                if len(payload) < 5:
                    raise ProtocolError(f.FRAME_SIZE_ERROR, "HEADERS too short for its priority")
                payload = payload[5:]
            if flags & f.END_HEADERS:
                self._headers(stream_id, flags, payload, events)
            else:
                if not payload:
                    self._glitch("empty HEADERS")
                self._headers_stream = stream_id
                self._headers_flags = flags
                self._headers_block = bytearray(payload)
        elif kind == f.CONTINUATION:
            if stream_id != self._headers_stream or stream_id == 0:
                raise ProtocolError(f.PROTOCOL_ERROR, "CONTINUATION of no header block")
            if not payload and not flags & f.END_HEADERS:
                self._glitch("empty CONTINUATION")
            self._headers_block += payload
            if len(self._headers_block) > MAX_HEADER_BLOCK:
                raise ProtocolError(f.PROTOCOL_ERROR, "a header block over the size limit")
            if flags & f.END_HEADERS:
                self._headers_stream = 0
                block = bytes(self._headers_block)
                self._headers_block = bytearray()
                self._headers(stream_id, self._headers_flags, block, events)
        elif kind == f.SETTINGS:
            if stream_id != 0:
                raise ProtocolError(f.PROTOCOL_ERROR, f"SETTINGS on stream {stream_id}")
            if flags & f.ACK:
                if payload:
                    raise ProtocolError(f.FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload")
                return
            if len(payload) % 6:
                raise ProtocolError(f.FRAME_SIZE_ERROR, "SETTINGS of a bad length")
            if len(payload) > 6 * MAX_SETTINGS_ENTRIES:
                raise ProtocolError(
                    f.ENHANCE_YOUR_CALM,
                    f"a SETTINGS frame of {len(payload) // 6} entries (at most "
                    f"{MAX_SETTINGS_ENTRIES})",
                )
            if self.handshaken:
                self._glitch("SETTINGS")
            self.handshaken = True
            self._settings(f.parse_settings(payload))
            events.append(WindowsChanged())
        elif kind == f.PING:
            if stream_id != 0:
                raise ProtocolError(f.PROTOCOL_ERROR, f"PING on stream {stream_id}")
            if len(payload) != 8:
                raise ProtocolError(f.FRAME_SIZE_ERROR, "PING of a bad length")
            if not flags & f.ACK:
                self._glitch("PING")
                self._answer(f.frame_header(8, f.PING, f.ACK, 0) + payload)
            elif payload == DRAIN_PING_DATA and self.going_away:
                events.append(DrainPingAcked())
            else:
                self._glitch("PING ACK of no PING")
        elif kind == f.WINDOW_UPDATE:
            self._window_update(stream_id, payload, events)
        elif kind == f.RST_STREAM:
            if stream_id == 0:
                raise ProtocolError(f.PROTOCOL_ERROR, "RST_STREAM on stream 0")
            if len(payload) != 4:
                raise ProtocolError(f.FRAME_SIZE_ERROR, "RST_STREAM of a bad length")
            if stream_id > self._highest:
                raise ProtocolError(f.PROTOCOL_ERROR, f"RST_STREAM of idle stream {stream_id}")
            stream = self.streams.pop(stream_id, None)
            if stream is None:
                self._glitch("RST_STREAM of a closed stream")
                return
            self._closed(stream)
            events.append(StreamReset(stream_id, f.read_u32(payload)))
            if not self._resets.spend(self._clock()):
                raise ProtocolError(
                    f.ENHANCE_YOUR_CALM,
                    f"too many streams reset: more than {self.limits.reset_burst}, then "
                    f"{self.limits.reset_rate:g} a second",
                )
        elif kind == f.GOAWAY:
            if stream_id != 0:
                raise ProtocolError(f.PROTOCOL_ERROR, f"GOAWAY on stream {stream_id}")
            if len(payload) < 8:
                raise ProtocolError(f.FRAME_SIZE_ERROR, "GOAWAY of a bad length")
            events.append(GoAwayReceived(f.read_goaway(payload)[1]))
        elif kind == f.PUSH_PROMISE:
            raise ProtocolError(f.PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        elif kind == f.PRIORITY:
            if stream_id == 0:
                raise ProtocolError(f.PROTOCOL_ERROR, "PRIORITY on stream 0")
            if len(payload) != 5:
                raise ProtocolError(f.FRAME_SIZE_ERROR, "PRIORITY of a bad length")
            self._glitch("PRIORITY")  # and nothing else: RFC 9113 deprecates priorities
        else:
            self._glitch(f"unknown frame type {kind}")  # ignored, as RFC 9113 4.1 says

    def _window_update(self, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if len(payload) != 4:
            raise ProtocolError(f.FRAME_SIZE_ERROR, "WINDOW_UPDATE of a bad length")
        increment = f.read_u32(payload) & 0x7FFF_FFFF
        if stream_id == 0:
            if increment == 0:
                raise ProtocolError(f.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0 on the connection")
            try:
                self.send_windows.grow_connection(increment)
            except FlowControlError as exc:
                raise ProtocolError(f.FLOW_CONTROL_ERROR, str(exc)) from None
            events.append(WindowsChanged())
            return
        if stream_id > self._highest:
            raise ProtocolError(f.PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {stream_id}")
        stream = self.streams.get(stream_id)
        if stream is None:
            return  # a closed stream's: it may have crossed our end of it
        if increment == 0:
            self._reset(stream, f.PROTOCOL_ERROR, events)
        elif self.send_windows.stream(stream.send_delta) + increment > MAX_WINDOW:
            self._reset(stream, f.FLOW_CONTROL_ERROR, events)
        else:
            stream.send_delta += increment
            events.append(WindowsChanged())

    def _settings(self, values: list[tuple[int, int]]) -> None:
        for key, value in values:
            if key == f.SETTINGS_INITIAL_WINDOW_SIZE:
                try:
                    self.send_windows.set_initial(value)
                except FlowControlError as exc:
                    raise ProtocolError(f.FLOW_CONTROL_ERROR, str(exc)) from None
            elif key == f.SETTINGS_MAX_FRAME_SIZE:
                if not f.DEFAULT_MAX_FRAME <= value <= 2**24 - 1:
                    raise ProtocolError(f.PROTOCOL_ERROR, "max frame size out of range")
                self.max_frame = value
            elif key == f.SETTINGS_ENABLE_PUSH and value > 1:
                raise ProtocolError(f.PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH of {value}")
        self._answer(f.SETTINGS_ACK)

    def _headers(self, stream_id: int, flags: int, block: bytes, events: list[Event]) -> None:
        # Every block is decoded, even one that is refused: the HPACK table stays in step.
        try:
            decoded = self._decoder.decode(block)
        except HeaderListTooLarge as exc:
            raise ProtocolError(f.ENHANCE_YOUR_CALM, str(exc)) from None
        except HeaderBlockError as exc:
            raise ProtocolError(f.COMPRESSION_ERROR, str(exc)) from None
        ended = bool(flags & f.END_STREAM)
        stream = self.streams.get(stream_id)
        if stream is not None:  # trailers from the client: only END_STREAM matters
            if not stream.remote_open:
                self._reset(stream, f.STREAM_CLOSED, events)
            elif not ended:
                self._reset(stream, f.PROTOCOL_ERROR, events)  # trailers end the stream
            else:
                stream.end_remote()
                events.append(StreamEnded(stream_id))
            return
        if stream_id <= self._highest:
            if not ended:
                raise ProtocolError(
                    f.PROTOCOL_ERROR,
                    f"stream {stream_id} opened after stream {self._highest} (ids must grow)",
                )
            self._glitch("trailers of a closed stream")
            return
        self._highest = stream_id
        if self.closing:
            self._answer(f.rst_stream(stream_id, f.REFUSED_STREAM))
            return
        limits = self.limits
        if len(self.streams) >= limits.max_concurrent_streams:
            # RFC 9113 5.1.2: past the advertised limit, a stream is refused (not served).
            self._answer(f.rst_stream(stream_id, f.REFUSED_STREAM))
            return
        if decoded.size > limits.max_header_list_bytes:
            self._refuse_headers(stream_id, ended, decoded.size)
            return
        if self._header_bytes + decoded.size > limits.header_bytes:
            self._answer(f.rst_stream(stream_id, f.REFUSED_STREAM))
            return
        if decoded.malformed:
            # A malformed request is a stream error (RFC 9113 8.1.1).
            self._answer(f.rst_stream(stream_id, f.PROTOCOL_ERROR))
            return
        self.last_stream = stream_id
        stream = Stream(stream_id, ended)
        self.streams[stream_id] = stream
        if decoded.method != b"POST":
            self.send_headers(stream, f.METHOD_NOT_ALLOWED, end_stream=True)
            return
        stream.header_bytes = decoded.size
        self._header_bytes += decoded.size
        events.append(RequestReceived(stream_id, decoded.fields, ended, decoded.request()))

    def _refuse_headers(self, stream_id: int, ended: bool, size: int) -> None:
        """A request whose headers were decoded whole (the HPACK table is in step) but are
        over the limit: refused on its own stream, the connection goes on. As gRPC's C core
        answers: a trailers-only RESOURCE_EXHAUSTED (then RST_STREAM NO_ERROR if the client
        is still sending). Each refusal spends a glitch token: a client cannot make the
        server decode oversized blocks without end."""
        self._glitch("a header list over the limit")
        self.last_stream = stream_id
        stream = Stream(stream_id, ended)
        self.streams[stream_id] = stream
        limit = self.limits.max_header_list_bytes
        message = (
            f"received metadata size exceeds the limit ({size} vs. {limit} bytes, "
            "SETTINGS_MAX_HEADER_LIST_SIZE)"
        )
        block = f.RESPONSE_HEADERS + f.status_fields(RESOURCE_EXHAUSTED, message)
        self.send_headers(stream, block, end_stream=True)

    def _reset(self, stream: Stream, code: int, events: list[Event]) -> None:
        """A stream error: RST_STREAM ``code``, and the owner told."""
        if self.streams.pop(stream.stream_id, None) is not None:
            self._closed(stream)
            self._answer(f.rst_stream(stream.stream_id, code))
            events.append(StreamReset(stream.stream_id, code, by_us=True))

    def _closed(self, stream: Stream) -> None:
        stream.reset()
        self._header_bytes -= stream.header_bytes
        stream.header_bytes = 0

    # -- sending --------------------------------------------------------------------------

    def send_room(self, stream: Stream) -> int:
        """Bytes of DATA the windows let us send on ``stream`` now."""
        return min(self.send_windows.connection, self.send_windows.stream(stream.send_delta))

    def stream_window(self, stream: Stream) -> int:
        return self.send_windows.stream(stream.send_delta)

    def send_message(
        self, stream: Stream, pieces: list[Any], framed: int, headers: bool, trailers: bool
    ) -> bool:
        """One DATA frame of ``framed`` bytes (``pieces``: the gRPC prefix and message),
        after the response headers if ``headers``, then the OK trailers if ``trailers``;
        False (nothing queued) when the frame size or the windows do not allow it now."""
        windows = self.send_windows
        if (
            framed > self.max_frame
            or framed > windows.connection
            or framed > windows.initial + stream.send_delta
        ):
            return False
        windows.connection -= framed
        stream.send_delta -= framed
        stream_id = stream.stream_id
        parts: list[Any] = []
        if headers:
            parts.append(response_headers_frame(stream_id))
        parts.append(f.frame_header(framed, f.DATA, 0, stream_id))
        parts += pieces
        if trailers:
            parts.append(f.frame_header(_OK_TRAILERS_HEADER_LENGTH, f.HEADERS, _END, stream_id))
            parts.append(f.OK_TRAILERS)
        self._queue_all(parts)
        if trailers:
            self._ended_locally(stream)
        return True

    def send_data(self, stream: Stream, room: int, take: Callable[[int], list[Any]]) -> None:
        """``room`` bytes (at most :meth:`send_room`) of DATA, in frames no larger than the
        client's frame size; ``take(n)`` gives the next ``n`` bytes' buffers."""
        self.send_windows.connection -= room
        stream.send_delta -= room
        stream_id = stream.stream_id
        parts: list[Any] = []
        while room:
            chunk = min(room, self.max_frame)
            parts.append(f.frame_header(chunk, f.DATA, 0, stream_id))
            parts += take(chunk)
            room -= chunk
        self._queue_all(parts)

    def send_response_headers(self, stream: Stream) -> None:
        self._queue(response_headers_frame(stream.stream_id))

    def send_headers(self, stream: Stream, block: bytes, *, end_stream: bool) -> None:
        """``block`` as HEADERS plus CONTINUATION frames within the client's frame size."""
        limit = self.max_frame
        stream_id = stream.stream_id
        first, rest = block[:limit], block[limit:]
        flags = (f.END_STREAM if end_stream else 0) | (0 if rest else f.END_HEADERS)
        parts = [f.frame_header(len(first), f.HEADERS, flags, stream_id), first]
        while rest:
            chunk, rest = rest[:limit], rest[limit:]
            flags = 0 if rest else f.END_HEADERS
            parts += [f.frame_header(len(chunk), f.CONTINUATION, flags, stream_id), chunk]
        self._answer(b"".join(parts))
        if end_stream:
            self._ended_locally(stream)

    def _ended_locally(self, stream: Stream) -> None:
        """Our END_STREAM went out: a client still sending is told to stop (RFC 9113 8.1)."""
        stream.end_local()
        if stream.remote_open:
            self._answer(f.rst_stream(stream.stream_id, f.NO_ERROR))
        if self.streams.pop(stream.stream_id, None) is not None:
            self._closed(stream)

    def reset_stream(self, stream: Stream, code: int) -> None:
        if self.streams.pop(stream.stream_id, None) is not None:
            self._closed(stream)
            self._queue(f.rst_stream(stream.stream_id, code))

    def give_credit(self, stream: Stream) -> None:
        """Give ``stream``'s received bytes back to the client's window, a quarter at a time."""
        if stream.remote_open and stream.unread_credit >= STREAM_WINDOW // 4:
            self._queue(f.window_update(stream.stream_id, stream.unread_credit))
            stream.unread_credit = 0

    # -- ending ---------------------------------------------------------------------------

    def start_drain(self) -> None:
        """The first GOAWAY of a drain (RFC 9113 6.8): no stream refused yet, and a PING
        whose ACK tells every stream the client opened before reading it has arrived."""
        if not self.going_away and not self.closing:
            self.going_away = True
            self._queue(f.goaway(f.MAX_WINDOW, f.NO_ERROR) + _DRAIN_PING)

    def final_goaway(self) -> None:
        """The final GOAWAY: it names the last stream served; later ones are refused."""
        if not self.closing:
            self.closing = True
            self._queue(f.goaway(self.last_stream, f.NO_ERROR))

    def _terminate(self, code: int, why: str) -> ConnectionTerminated:
        """A connection error: GOAWAY ``code`` and nothing more read."""
        if self._preface and not self.terminated:
            self._queue(f.goaway(self.last_stream, code, why.encode()[:256]))
        self.closing = True
        self.terminated = True
        self._pending = b""
        self._data_left = self._data_padding = 0
        self._data_stream = None
        self._headers_block = bytearray()
        return ConnectionTerminated(code, why)

    def terminate(self, code: int, why: str) -> ConnectionTerminated:
        """End the connection with GOAWAY ``code`` (an internal error, a timeout)."""
        return self._terminate(code, why)

    def cancel_all(self) -> None:
        """RST_STREAM CANCEL to every open stream."""
        for stream in list(self.streams.values()):
            self.reset_stream(stream, f.CANCEL)


def response_headers_frame(stream_id: int) -> bytes:
    return f.frame_header(_RESPONSE_HEADERS_LENGTH, f.HEADERS, f.END_HEADERS, stream_id) + (
        f.RESPONSE_HEADERS
    )
