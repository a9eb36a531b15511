"""The HTTP/2 core without sockets: bytes from python-hyper's ``h2`` client in, events out,
and the core's answer read back by that client (so it is valid HTTP/2 to a real peer)."""

from __future__ import annotations

from typing import Any

import h2.config
import h2.connection
import h2.events

from conveyor.server.grpc.h2 import frames as f
from conveyor.server.grpc.h2.core import H2Core
from conveyor.server.grpc.h2.events import (
    ConnectionTerminated,
    DataFrameEnded,
    DataReceived,
    Event,
    RequestReceived,
    StreamEnded,
    StreamReset,
    WindowsChanged,
)

REQUEST = [
    (":method", "POST"), (":scheme", "http"), (":path", "/inference.GRPCInferenceService/X"),
    (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
]  # fmt: skip


def flat(output: list[Any]) -> bytes:
    return b"".join(bytes(piece) for piece in output)


class Pair:
    """An ``h2`` client and the core, wired by hand: every byte goes through a method call."""

    def __init__(self) -> None:
        self.client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.client.initiate_connection()
        self.core = H2Core()
        self.core.initiate()
        # The prefaces and SETTINGS both ways, acknowledged: the tests start from here.
        assert self.to_core() == [WindowsChanged()]
        self.to_client()
        self.to_core()

    def to_core(self) -> list[Event]:
        return self.core.receive_data(self.client.data_to_send())

    def to_client(self) -> list[h2.events.Event]:
        return self.client.receive_data(flat(self.core.data_to_send()))


def test_a_unary_request_is_three_events_and_the_answer_reads_back() -> None:
    pair = Pair()
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_headers(stream_id, REQUEST)
    pair.client.send_data(stream_id, b"\x00\x00\x00\x00\x03abc", end_stream=True)
    events = pair.to_core()
    kinds = [type(event) for event in events]
    assert kinds == [RequestReceived, DataReceived, StreamEnded], events
    request = events[0]
    assert isinstance(request, RequestReceived) and request.stream_id == stream_id
    assert (b":path", b"/inference.GRPCInferenceService/X") in request.fields
    data = events[1]
    assert isinstance(data, DataReceived)
    assert data.data[data.start : data.end] == b"\x00\x00\x00\x00\x03abc"

    stream = pair.core.streams[stream_id]
    assert pair.core.send_message(stream, [f.message_prefix(2), b"ok"], 7, True, True)
    assert stream_id not in pair.core.streams  # our END_STREAM closed it
    answers = pair.to_client()
    ended = [e for e in answers if isinstance(e, h2.events.StreamEnded)]
    received = [e for e in answers if isinstance(e, h2.events.DataReceived)]
    trailers = [e for e in answers if isinstance(e, h2.events.TrailersReceived)]
    assert ended and ended[0].stream_id == stream_id
    assert received[0].data == b"\x00\x00\x00\x00\x02ok"
    assert (b"grpc-status", b"0") in trailers[0].headers


def test_bytes_fed_one_at_a_time_give_the_same_events() -> None:
    pair = Pair()
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_headers(stream_id, REQUEST)
    pair.client.send_data(stream_id, b"\x00\x00\x00\x00\x02hi", end_stream=True)
    wire = pair.client.data_to_send()
    events: list[Event] = []
    for index in range(len(wire)):
        events += pair.core.receive_data(wire[index : index + 1])
    payload = b"".join(e.data[e.start : e.end] for e in events if isinstance(e, DataReceived))
    assert payload == b"\x00\x00\x00\x00\x02hi"
    assert isinstance(events[0], RequestReceived)
    assert isinstance(events[-1], StreamEnded)


def test_a_data_frame_without_end_stream_ends_as_a_frame() -> None:
    pair = Pair()
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_headers(stream_id, REQUEST)
    pair.client.send_data(stream_id, b"\x00\x00\x00\x00\x01x")
    assert [type(e) for e in pair.to_core()] == [RequestReceived, DataReceived, DataFrameEnded]


def test_a_client_reset_closes_the_stream() -> None:
    pair = Pair()
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_headers(stream_id, REQUEST)
    pair.to_core()
    pair.client.reset_stream(stream_id, 8)
    events = pair.to_core()
    assert events == [StreamReset(stream_id, 8)]
    assert stream_id not in pair.core.streams


def test_initial_window_changes_move_every_stream_at_once() -> None:
    pair = Pair()
    ids = []
    for _ in range(3):
        stream_id = pair.client.get_next_available_stream_id()
        pair.client.send_headers(stream_id, REQUEST)
        ids.append(stream_id)
    pair.to_core()
    pair.client.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1000})
    assert WindowsChanged() in pair.to_core()
    assert [pair.core.stream_window(pair.core.streams[i]) for i in ids] == [1000] * 3
    assert pair.core.send_room(pair.core.streams[ids[0]]) == 1000


def test_a_message_over_the_window_waits_and_goes_in_frames() -> None:
    pair = Pair()
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_headers(stream_id, REQUEST, end_stream=True)
    pair.to_core()
    stream = pair.core.streams[stream_id]
    big = b"x" * 70_000
    pieces = [f.message_prefix(len(big)), big]
    assert not pair.core.send_message(stream, pieces, 70_005, True, False)
    pair.core.send_response_headers(stream)
    room = pair.core.send_room(stream)
    assert room == f.DEFAULT_WINDOW
    cursor = f.PieceCursor([memoryview(f.message_prefix(len(big))), memoryview(big)])
    pair.core.send_data(stream, room, cursor.take)
    got = [e for e in pair.to_client() if isinstance(e, h2.events.DataReceived)]
    assert sum(len(e.data) for e in got) == f.DEFAULT_WINDOW
    assert all(len(e.data) <= f.DEFAULT_MAX_FRAME for e in got)
    assert pair.core.send_room(stream) == 0


def test_garbage_instead_of_a_preface_is_a_protocol_error() -> None:
    core = H2Core()
    events = core.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert events == [ConnectionTerminated(f.PROTOCOL_ERROR, "not an HTTP/2 client preface")]
    assert core.terminated
    assert core.receive_data(f.PREFACE) == []  # nothing more is read
