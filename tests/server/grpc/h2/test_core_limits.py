"""The core's answers to what RFC 9113 forbids and to frames sent only to cost the server
work: bytes built with python-hyper's ``hyperframe`` (frames a real client never sends),
fed to the core without a socket, and the code of the GOAWAY or RST_STREAM read back."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import hpack
import pytest
from hyperframe import frame as hf

from conveyor.server.grpc.h2 import frames as f
from conveyor.server.grpc.h2.core import H2Core
from conveyor.server.grpc.h2.events import (
    ConnectionTerminated,
    Event,
    RequestReceived,
    StreamReset,
)
from conveyor.server.grpc.h2.limits import Limits

REQUEST = [
    (":method", "POST"), (":scheme", "http"), (":path", "/inference.GRPCInferenceService/X"),
    (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
]  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Peer:
    """A core past its handshake, and a client-side HPACK encoder for it."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.clock = Clock()
        self.core = H2Core(limits=limits, clock=self.clock)
        self.core.initiate()
        self.encoder = hpack.Encoder()
        events = self.core.receive_data(f.PREFACE + hf.SettingsFrame(0).serialize())
        assert not any(isinstance(e, ConnectionTerminated) for e in events)
        self.core.data_to_send()

    def send(self, *frames: hf.Frame) -> list[Event]:
        return self.core.receive_data(b"".join(frame.serialize() for frame in frames))

    def headers(
        self, stream_id: int, fields: list[tuple[str, str]] | None = None, *, end: bool = False
    ) -> hf.HeadersFrame:
        flags = ["END_HEADERS", *(["END_STREAM"] if end else [])]
        return hf.HeadersFrame(stream_id, self.encoder.encode(fields or REQUEST), flags=flags)

    def output(self) -> list[tuple[int, int, int]]:
        """(type, stream id, error code) of each RST_STREAM and GOAWAY the core queued."""
        data = b"".join(bytes(piece) for piece in self.core.data_to_send())
        out, at = [], 0
        while at < len(data):
            length, kind, _, stream_id = f.parse_header(data, at)
            payload = data[at + 9 : at + 9 + length]
            if kind == f.RST_STREAM:
                out.append((kind, stream_id, f.read_u32(payload)))
            elif kind == f.GOAWAY:
                out.append((kind, stream_id, f.read_goaway(payload)[1]))
            at += 9 + length
        return out


def goaway(peer: Peer, events: list[Any], code: int) -> None:
    assert isinstance(events[-1], ConnectionTerminated), events
    assert events[-1].code == code, events[-1]
    assert (f.GOAWAY, 0, code) in peer.output()
    assert peer.core.terminated


def rst(peer: Peer, stream_id: int, code: int) -> None:
    assert (f.RST_STREAM, stream_id, code) in peer.output()


# -- connection errors --------------------------------------------------------------------


def settings_frame(stream_id: int = 0, **kwargs: Any) -> hf.SettingsFrame:
    return hf.SettingsFrame(stream_id, **kwargs)


CONNECTION_ERRORS = {
    "ENABLE_PUSH=2": (lambda p: [hf.SettingsFrame(0, settings={2: 2})], f.PROTOCOL_ERROR),
    "SETTINGS on stream 1": (
        lambda p: [p.headers(1), _raw(f.SETTINGS, 0, 1, b"")],
        f.PROTOCOL_ERROR,
    ),
    "SETTINGS ACK with a payload": (
        lambda p: [_raw(f.SETTINGS, f.ACK, 0, b"\x00\x04\x00\x00\x00\x01")],
        f.FRAME_SIZE_ERROR,
    ),
    "WINDOW_UPDATE of 0 on the connection": (
        lambda p: [hf.WindowUpdateFrame(0, window_increment=0)],
        f.PROTOCOL_ERROR,
    ),
    "connection window past 2^31-1": (
        lambda p: [hf.WindowUpdateFrame(0, window_increment=2**31 - 1)],
        f.FLOW_CONTROL_ERROR,
    ),
    "DATA on an idle stream": (lambda p: [hf.DataFrame(5, b"x")], f.PROTOCOL_ERROR),
    "stream id decreasing": (
        lambda p: [p.headers(5), p.headers(3)],
        f.PROTOCOL_ERROR,
    ),
    "stream id reused": (
        lambda p: [p.headers(1), hf.RstStreamFrame(1, error_code=8), p.headers(1)],
        f.PROTOCOL_ERROR,
    ),
    "RST_STREAM on stream 0": (
        lambda p: [_raw(f.RST_STREAM, 0, 0, b"\x00\x00\x00\x08")],
        f.PROTOCOL_ERROR,
    ),
    "RST_STREAM of an idle stream": (
        lambda p: [hf.RstStreamFrame(9, error_code=8)],
        f.PROTOCOL_ERROR,
    ),
    "WINDOW_UPDATE of an idle stream": (
        lambda p: [hf.WindowUpdateFrame(9, window_increment=1)],
        f.PROTOCOL_ERROR,
    ),
    "PADDED HEADERS of 0 bytes": (
        lambda p: [_raw(f.HEADERS, f.PADDED | f.END_HEADERS, 1, b"")],
        f.FRAME_SIZE_ERROR,
    ),
    "HEADERS with PRIORITY of 2 bytes": (
        lambda p: [_raw(f.HEADERS, f.PRIORITY_FLAG | f.END_HEADERS, 1, b"\x00\x00")],
        f.FRAME_SIZE_ERROR,
    ),
    "PING on stream 1": (lambda p: [_raw(f.PING, 0, 1, bytes(8))], f.PROTOCOL_ERROR),
    "PRIORITY on stream 0": (lambda p: [_raw(f.PRIORITY, 0, 0, bytes(5))], f.PROTOCOL_ERROR),
    "SETTINGS of 33 entries": (
        lambda p: [_raw(f.SETTINGS, 0, 0, b"\x00\x01\x00\x00\x10\x00" * 33)],
        f.ENHANCE_YOUR_CALM,
    ),
}


class _Raw(hf.Frame):
    """A frame exactly as given: hyperframe refuses to build some of the forbidden ones."""

    def __init__(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        self._bytes = f.frame_header(len(payload), kind, flags, stream_id) + payload

    def serialize(self) -> bytes:
        return self._bytes


def _raw(kind: int, flags: int, stream_id: int, payload: bytes) -> hf.Frame:
    return _Raw(kind, flags, stream_id, payload)


@pytest.mark.parametrize("case", sorted(CONNECTION_ERRORS))
def test_connection_errors_are_a_goaway_with_the_rfcs_code(case: str) -> None:
    build, code = CONNECTION_ERRORS[case]
    peer = Peer()
    goaway(peer, peer.send(*build(peer)), code)


def test_the_preface_must_be_followed_by_settings() -> None:
    core = H2Core()
    events = core.receive_data(f.PREFACE + hf.PingFrame(0, opaque_data=bytes(8)).serialize())
    assert isinstance(events[-1], ConnectionTerminated)
    assert events[-1].code == f.PROTOCOL_ERROR


# -- stream errors ------------------------------------------------------------------------

MALFORMED = {
    "no :method": [field for field in REQUEST if field[0] != ":method"],
    "no :scheme": [field for field in REQUEST if field[0] != ":scheme"],
    "no :path": [field for field in REQUEST if field[0] != ":path"],
    "an uppercase name": [*REQUEST, ("X-Upper", "1")],
    "a pseudo-header after a regular field": [*REQUEST[1:], REQUEST[0]],
    "connection:": [*REQUEST, ("connection", "keep-alive")],
    "te: gzip": [*REQUEST[:-1], ("te", "gzip")],
    "an unknown pseudo-header": [*REQUEST[:4], (":x", "1"), *REQUEST[4:]],
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_requests_are_reset_and_never_reach_the_service(case: str) -> None:
    peer = Peer()
    events = peer.send(peer.headers(1, MALFORMED[case]))
    assert not any(isinstance(e, RequestReceived) for e in events)
    rst(peer, 1, f.PROTOCOL_ERROR)
    # The connection goes on: the next request is served.
    assert isinstance(peer.send(peer.headers(3))[0], RequestReceived)


def test_get_is_405_and_never_reaches_the_service() -> None:
    peer = Peer()
    fields = [(":method", "GET"), *REQUEST[1:]]
    events = peer.send(peer.headers(1, fields, end=True))
    assert events == []
    data = b"".join(bytes(piece) for piece in peer.core.data_to_send())
    assert f.METHOD_NOT_ALLOWED in data
    assert 1 not in peer.core.streams


def test_window_update_of_0_or_past_the_maximum_resets_the_stream() -> None:
    peer = Peer()
    peer.send(peer.headers(1), peer.headers(3))
    events = peer.send(hf.WindowUpdateFrame(1, window_increment=0))
    assert events == [StreamReset(1, f.PROTOCOL_ERROR, by_us=True)]
    events = peer.send(hf.WindowUpdateFrame(3, window_increment=2**31 - 1))
    assert events == [StreamReset(3, f.FLOW_CONTROL_ERROR, by_us=True)]
    rst(peer, 1, f.PROTOCOL_ERROR)
    assert not peer.core.terminated


def test_data_after_end_stream_is_stream_closed() -> None:
    peer = Peer()
    peer.send(peer.headers(1, end=True))
    events = peer.send(hf.DataFrame(1, b"late"))
    assert events == [StreamReset(1, f.STREAM_CLOSED, by_us=True)]
    rst(peer, 1, f.STREAM_CLOSED)


def test_data_on_a_closed_stream_is_skipped() -> None:
    """DATA may cross our END_STREAM: it is not an error."""
    peer = Peer()
    peer.send(peer.headers(1), hf.RstStreamFrame(1, error_code=8))
    assert peer.send(hf.DataFrame(1, b"in flight")) == []
    assert not peer.core.terminated


# -- limits -------------------------------------------------------------------------------


def test_streams_past_max_concurrent_streams_are_refused() -> None:
    peer = Peer(Limits(max_concurrent_streams=3))
    events = peer.send(*(peer.headers(stream_id) for stream_id in (1, 3, 5, 7)))
    assert [e.stream_id for e in events if isinstance(e, RequestReceived)] == [1, 3, 5]
    rst(peer, 7, f.REFUSED_STREAM)
    peer.send(hf.RstStreamFrame(1, error_code=8))
    assert isinstance(peer.send(peer.headers(9))[0], RequestReceived)  # room again


def test_a_header_list_far_past_the_limit_is_enhance_your_calm() -> None:
    """One 4 KB table entry named many times by one-byte references: decoding stops at four
    times the limit instead of building megabytes of strings; the block is not decoded to
    its end, so the HPACK table cannot be trusted and the connection ends."""
    peer = Peer(Limits(max_header_list_bytes=16 * 1024))
    big = ("x-big", "v" * 4000)
    block = peer.encoder.encode([*REQUEST, big]) + b"\xbe" * 60  # index 62: the entry
    events = peer.send(hf.HeadersFrame(1, block, flags=["END_HEADERS"]))
    goaway(peer, events, f.ENHANCE_YOUR_CALM)


def test_header_bytes_held_by_open_streams_are_bounded_per_connection() -> None:
    peer = Peer(Limits(header_bytes=4096))
    fields = [*REQUEST, ("x-pad", "p" * 1000)]
    events = peer.send(*(peer.headers(stream_id, fields) for stream_id in (1, 3, 5, 7)))
    opened = [e.stream_id for e in events if isinstance(e, RequestReceived)]
    assert 1 <= len(opened) < 4
    rst(peer, 7, f.REFUSED_STREAM)


def test_initial_window_changes_cost_the_same_with_many_streams_open() -> None:
    peer = Peer()
    peer.send(*(peer.headers(stream_id) for stream_id in range(1, 4001, 2)))
    assert len(peer.core.streams) == 2000
    for value in (1, 2**31 - 1, 100):
        peer.send(hf.SettingsFrame(0, settings={4: value}))
    assert {peer.core.stream_window(s) for s in peer.core.streams.values()} == {100}


FREE_FRAMES: dict[str, Callable[[int], hf.Frame]] = {
    "PING": lambda i: hf.PingFrame(0, opaque_data=i.to_bytes(8, "big")),
    "SETTINGS": lambda i: hf.SettingsFrame(0, settings={}),
    "PRIORITY": lambda i: hf.PriorityFrame(1, depends_on=0, stream_weight=16),
    "empty DATA": lambda i: hf.DataFrame(1, b""),
    "unknown type": lambda i: _raw(0xEE, 0, 0, b"x"),
}


@pytest.mark.parametrize("case", [*sorted(FREE_FRAMES), "empty CONTINUATION"])
def test_frames_that_cost_nothing_to_send_have_a_budget(case: str) -> None:
    peer = Peer(Limits(glitch_burst=50, glitch_rate=10.0))
    peer.send(peer.headers(1))
    peer.output()
    if case == "empty CONTINUATION":
        start = hf.HeadersFrame(3, peer.encoder.encode(REQUEST))
        frames = [start, *(hf.ContinuationFrame(3, b"") for _ in range(60))]
    else:
        frames = [FREE_FRAMES[case](index) for index in range(60)]
    events = peer.send(*frames)
    goaway(peer, events, f.ENHANCE_YOUR_CALM)


def test_the_budget_refills_with_time() -> None:
    peer = Peer(Limits(glitch_burst=50, glitch_rate=10.0))
    for _ in range(10):  # 40 PINGs a second for 10 s: within 50 and 10 a second
        peer.send(*(hf.PingFrame(0, opaque_data=bytes(8)) for _ in range(10)))
        peer.clock.now += 1.0
    assert not peer.core.terminated


def test_rapid_reset_has_a_budget() -> None:
    peer = Peer(Limits(reset_burst=100, reset_rate=10.0))
    frames: list[hf.Frame] = []
    for stream_id in range(1, 2 * 150, 2):
        frames += [peer.headers(stream_id), hf.RstStreamFrame(stream_id, error_code=8)]
    events = peer.send(*frames)
    goaway(peer, events, f.ENHANCE_YOUR_CALM)
    resets = [e for e in events if isinstance(e, StreamReset)]
    assert 100 <= len(resets) <= 101


def test_answers_to_a_client_that_does_not_read_stop_the_reading() -> None:
    peer = Peer(Limits(induced_bytes=1000))
    peer.core.output_blocked = True  # the transport's buffer is full
    peer.send(*(hf.PingFrame(0, opaque_data=bytes(8)) for _ in range(40)))
    assert not peer.core.read_paused  # 40 ACKs of 17 bytes
    peer.send(*(hf.PingFrame(0, opaque_data=bytes(8)) for _ in range(40)))
    assert peer.core.read_paused
    peer.core.output_blocked = False
    peer.core.induced = 0
    assert not peer.core.read_paused


def test_bad_grpc_timeouts_do_not_parse() -> None:
    assert f.parse_timeout("1" * 401 + "S") is None
    assert f.parse_timeout("123456789m") is None  # 9 digits
    assert f.parse_timeout("\uff11S") is None  # a fullwidth digit: not ASCII
    assert f.parse_timeout("-1S") is None
    assert f.parse_timeout("12345678S") == 12345678.0
    assert f.parse_timeout("100m") == pytest.approx(0.1)


def test_a_block_of_empty_literals_is_cut_off_at_the_header_list_limit() -> None:
    """24 KB of empty "literal without indexing" fields (three bytes each): HPACK's measure
    counts 32 bytes a field, so decoding stops after 2,048 of them (four times the 16 KiB
    limit), not 8,000."""
    peer = Peer()
    block = peer.encoder.encode(REQUEST) + b"\x00\x00\x00" * 8000
    start = time.process_time()
    events = peer.send(hf.HeadersFrame(1, block, flags=["END_HEADERS"]))
    assert time.process_time() - start < 0.5
    goaway(peer, events, f.ENHANCE_YOUR_CALM)


def answers(peer: Peer) -> list[tuple[int, int, int, bytes]]:
    """(type, stream id, flags, payload) of each frame the core queued."""
    data = b"".join(bytes(piece) for piece in peer.core.data_to_send())
    out, at = [], 0
    while at < len(data):
        length, kind, flags, stream_id = f.parse_header(data, at)
        out.append((kind, stream_id, flags, data[at + 9 : at + 9 + length]))
        at += 9 + length
    return out


def test_headers_over_the_limit_but_decoded_whole_refuse_only_their_stream() -> None:
    """20 fields of 900 bytes, past a 16 KiB limit: the block is decoded to its end (the
    HPACK table stays in step), the call gets RESOURCE_EXHAUSTED trailers-only (gRPC's C
    core's answer) and the connection serves the next call, whose block names by index a
    field the refused block added to the table."""
    peer = Peer(Limits(max_header_list_bytes=16 * 1024))
    metadata = [(f"x-m{index}", str(index) * 900) for index in range(20)]
    big = peer.encoder.encode([*REQUEST, *metadata])  # each field enters both tables
    events = peer.send(
        hf.HeadersFrame(1, big[:16_000]),
        hf.ContinuationFrame(1, big[16_000:], flags=["END_HEADERS"]),
    )
    assert not [e for e in events if isinstance(e, RequestReceived | ConnectionTerminated)]
    frames = answers(peer)
    (headers,) = [(flags, payload) for kind, sid, flags, payload in frames if kind == f.HEADERS]
    flags, payload = headers
    assert flags & f.END_STREAM
    decoded = dict(hpack.Decoder().decode(payload))
    assert decoded["grpc-status"] == "8"  # RESOURCE_EXHAUSTED
    assert "16384" in decoded["grpc-message"] and "exceeds" in decoded["grpc-message"]
    # The client had not ended its stream: it is told to stop sending (RFC 9113 8.1).
    assert (f.RST_STREAM, 1, 0, bytes(4)) in frames
    assert not peer.core.terminated
    block = peer.encoder.encode([*REQUEST, metadata[-1]])
    assert len(block) < 100  # the 900-byte value goes as an index into the table
    events = peer.send(hf.HeadersFrame(3, block, flags=["END_HEADERS"]))
    (received,) = [e for e in events if isinstance(e, RequestReceived)]
    assert (b"x-m19", b"19" * 900) in received.fields


def test_oversized_header_lists_spend_the_glitch_budget() -> None:
    peer = Peer(Limits(max_header_list_bytes=1024, glitch_burst=20, glitch_rate=1.0))
    fields = [*REQUEST, ("x-big", "v" * 2000)]
    frames = [peer.headers(stream_id, fields) for stream_id in range(1, 2 * 30, 2)]
    events = peer.send(*frames)
    goaway(peer, events, f.ENHANCE_YOUR_CALM)
