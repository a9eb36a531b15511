"""Hostile HTTP/2 clients against a real ``conveyor serve`` on Conveyor's own transport.

Each attack is built with python-hyper's ``hyperframe`` (frames a normal client never
sends), its answer is read back (the GOAWAY or RST_STREAM code RFC 9113 and nghttp2 give),
and a tritonclient on another connection must keep being served, during the attack where
the attack takes time. The server here has small limits so an attack reaches them fast.
"""

from __future__ import annotations

import contextlib
import gzip
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hyperframe import frame as hf

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.testing import RunningServer, run_server
from tests.server.grpc.h2.attacks import (
    ENHANCE_YOUR_CALM,
    FRAME_SIZE_ERROR,
    INTERNAL,
    INVALID_ARGUMENT,
    MAX_STREAMS,
    OK,
    PROTOCOL_ERROR,
    REFUSED_STREAM,
    REQUEST,
    Attacker,
    Bystander,
    raw,
    served,
    tiny_message,
)
from tests.server.grpc.h2.raw_client import PREFACE, RawClient, grpc_message

pytestmark = pytest.mark.alone  # measures rate, time or memory: run after the parallel part


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    args = [
        "--grpc-max-message-bytes", str(8 * 1024 * 1024),
        "--grpc-max-concurrent-streams", str(MAX_STREAMS),
        "--grpc-handshake-timeout", "1",
        "--grpc-send-timeout", "1",
    ]  # fmt: skip
    with run_server(repository, extra_args=args) as running:
        yield running
        assert running.stop() == 0, running.output()
        assert "Traceback" not in running.output(), running.output()


def test_rapid_reset_gets_enhance_your_calm_and_others_are_served(server: RunningServer) -> None:
    with Bystander(server), Attacker(server.grpc_port) as attacker:
        for start in range(1, 2 * 3000, 2 * 100):  # 3,000 streams opened and reset at once
            batch: list[hf.Frame] = []
            for stream_id in range(start, start + 2 * 100, 2):
                batch.append(attacker.opening(stream_id))
                batch.append(hf.RstStreamFrame(stream_id, error_code=8))
            try:
                attacker.send_frames(*batch)
            except (BrokenPipeError, ConnectionResetError):
                break
        assert attacker.goaway_code() == ENHANCE_YOUR_CALM
    served(server)


def test_a_ping_flood_that_never_reads_is_bounded(server: RunningServer) -> None:
    """The server stops reading a client that does not read its ACKs: memory stays flat."""
    process = psutil.Process(server.process.pid)
    rss_before = process.memory_info().rss
    sock = socket.create_connection(("127.0.0.1", server.grpc_port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(PREFACE + hf.SettingsFrame(0).serialize())
    ping = hf.PingFrame(0, opaque_data=bytes(8)).serialize() * 1000
    sock.settimeout(2.0)
    sent = 0
    deadline = time.monotonic() + 10
    with Bystander(server):
        try:
            while time.monotonic() < deadline and sent < 2_000_000:
                sock.sendall(ping)
                sent += 1000
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading us (or calmed us down)
        grown = process.memory_info().rss - rss_before
    sock.close()
    # 2,000,000 PINGs unanswered would be 34 MB of ACKs queued; the server stopped well short.
    assert sent < 2_000_000, "the server never stopped reading"
    assert grown < 32 * 1024 * 1024, f"RSS grew {grown / 2**20:.0f} MiB"
    served(server)


def test_streams_past_the_advertised_limit_are_refused(server: RunningServer) -> None:
    with Attacker(server.grpc_port) as attacker:
        ids = list(range(1, 2 * (MAX_STREAMS + 4), 2))
        attacker.send_frames(*(attacker.opening(stream_id) for stream_id in ids))  # no messages
        for stream_id in ids[MAX_STREAMS:]:
            assert attacker.reset_code(stream_id) == REFUSED_STREAM
        for stream_id in ids[:MAX_STREAMS]:
            assert stream_id not in attacker.answers or not attacker.answers[stream_id].ended
        served(server)
        # Once calls end there is room again.
        attacker.send_frames(*(hf.RstStreamFrame(stream_id, error_code=8) for stream_id in ids[:4]))
        stream_id = ids[-1] + 2
        attacker.send_frames(attacker.opening(stream_id))
        attacker.send(raw(0x0, 0x1, stream_id, tiny_message()))
        assert attacker.until_closed(stream_id).status() == OK


def test_one_table_entry_named_many_times_gets_enhance_your_calm(server: RunningServer) -> None:
    with Attacker(server.grpc_port) as attacker:
        block = attacker.hpack.encode([*REQUEST, ("x-big", "v" * 4000)]) + b"\xbe" * 60
        attacker.send_frames(hf.HeadersFrame(1, block, flags=["END_HEADERS"]))
        assert attacker.goaway_code() == ENHANCE_YOUR_CALM
    served(server)


@pytest.mark.parametrize(
    "case",
    ["empty CONTINUATION", "PRIORITY", "unknown frame type", "SETTINGS", "empty DATA"],
)
def test_floods_of_free_frames_get_enhance_your_calm(server: RunningServer, case: str) -> None:
    with Attacker(server.grpc_port) as attacker:
        if case == "empty CONTINUATION":
            frames = raw(0x1, 0, 1, attacker.hpack.encode(REQUEST)) + raw(0x9, 0, 1, b"") * 2000
        elif case == "PRIORITY":
            frames = raw(0x2, 0, 1, b"\x00\x00\x00\x00\x10") * 2000
        elif case == "unknown frame type":
            frames = raw(0xEE, 0, 0, b"x") * 2000
        elif case == "SETTINGS":
            frames = raw(0x4, 0, 0, b"") * 2000
        else:
            frames = attacker.opening(1).serialize() + raw(0x0, 0, 1, b"") * 2000
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            attacker.send(frames)
        assert attacker.goaway_code() == ENHANCE_YOUR_CALM
    served(server)


@pytest.mark.parametrize(
    ("case", "frames", "code"),
    [
        ("PADDED HEADERS of 0 bytes", raw(0x1, 0x8 | 0x4, 1, b""), FRAME_SIZE_ERROR),
        ("ENABLE_PUSH=2", raw(0x4, 0, 0, b"\x00\x02\x00\x00\x00\x02"), PROTOCOL_ERROR),
        ("SETTINGS on stream 1", raw(0x4, 0, 1, b""), PROTOCOL_ERROR),
        ("SETTINGS ACK with a payload", raw(0x4, 0x1, 0, b"\x00\x04\x00\x00\x00\x01"), 0x6),
        ("WINDOW_UPDATE of 0", raw(0x8, 0, 0, b"\x00\x00\x00\x00"), PROTOCOL_ERROR),
        ("window past 2^31-1", raw(0x8, 0, 0, b"\x7f\xff\xff\xff"), 0x3),
        ("DATA on an idle stream", raw(0x0, 0, 7, b"x"), PROTOCOL_ERROR),
        ("RST_STREAM on stream 0", raw(0x3, 0, 0, b"\x00\x00\x00\x08"), PROTOCOL_ERROR),
    ],
)
def test_connection_errors_get_the_rfcs_goaway(
    server: RunningServer, case: str, frames: bytes, code: int
) -> None:
    with Attacker(server.grpc_port) as attacker:
        attacker.send(frames)
        assert attacker.goaway_code() == code, case
    served(server)


def test_stream_ids_that_go_back_get_a_goaway(server: RunningServer) -> None:
    with Attacker(server.grpc_port) as attacker:
        attacker.send_frames(attacker.opening(5, end=True), attacker.opening(3))
        assert attacker.goaway_code() == PROTOCOL_ERROR


MALFORMED = {
    "no :method": [field for field in REQUEST if field[0] != ":method"],
    "no :scheme": [field for field in REQUEST if field[0] != ":scheme"],
    "an uppercase name": [*REQUEST, ("X-Upper", "1")],
    "a pseudo-header after a regular field": [*REQUEST[1:], REQUEST[0]],
    "connection:": [*REQUEST, ("connection", "close")],
    "te: gzip": [*REQUEST[:-1], ("te", "gzip")],
}


def test_malformed_requests_are_reset_and_the_connection_goes_on(server: RunningServer) -> None:
    with Attacker(server.grpc_port) as attacker:
        for index, fields in enumerate(MALFORMED.values()):
            stream_id = 1 + 2 * index
            attacker.send_frames(attacker.opening(stream_id, fields))
            attacker.send(raw(0x0, 0x1, stream_id, tiny_message()))
            assert attacker.reset_code(stream_id) == PROTOCOL_ERROR
        stream_id = 1 + 2 * len(MALFORMED)
        attacker.send_frames(
            attacker.opening(stream_id, [(":method", "GET"), *REQUEST[1:]], end=True)
        )
        assert dict(attacker.until_closed(stream_id).headers)[":status"] == "405"
        stream_id += 2
        attacker.send_frames(attacker.opening(stream_id))
        attacker.send(raw(0x0, 0x1, stream_id, tiny_message()))
        assert attacker.until_closed(stream_id).status() == OK


@pytest.mark.parametrize("timeout", ["1" * 401 + "S", "abc", "-5m", "123456789S"])
def test_a_bad_grpc_timeout_is_refused_not_served(server: RunningServer, timeout: str) -> None:
    with Attacker(server.grpc_port) as attacker:
        attacker.send_frames(attacker.opening(1, [*REQUEST, ("grpc-timeout", timeout)]))
        attacker.send(raw(0x0, 0x1, 1, tiny_message()))
        answer = attacker.until_closed(1)
        assert answer.status() == INTERNAL
        assert "malformed grpc-timeout" in answer.message()
        attacker.send_frames(attacker.opening(3))
        attacker.send(raw(0x0, 0x1, 3, tiny_message()))
        assert attacker.until_closed(3).status() == OK  # the connection goes on


def test_a_connection_that_never_speaks_is_closed(server: RunningServer) -> None:
    sock = socket.create_connection(("127.0.0.1", server.grpc_port), timeout=15)
    start = time.monotonic()
    received = b""
    while chunk := sock.recv(65536):  # the server's SETTINGS, then the close
        received += chunk
    sock.close()
    assert time.monotonic() - start < 10  # --grpc-handshake-timeout 1
    assert received[3] == 0x4  # it had sent its SETTINGS


def test_a_4_mib_message_of_zeros_is_refused_at_once(server: RunningServer) -> None:
    process = psutil.Process(server.process.pid)
    cpu_before = sum(process.cpu_times()[:2])
    with Attacker(server.grpc_port) as attacker:
        attacker.send_frames(attacker.opening(1))
        attacker.data(1, grpc_message(bytes(4 * 1024 * 1024)))
        answer = attacker.until_closed(1)
        assert answer.status() == INVALID_ARGUMENT, answer.message()
    assert sum(process.cpu_times()[:2]) - cpu_before < 1.5


def test_an_idle_connection_costs_a_few_kib(server: RunningServer) -> None:
    """No buffer of its own per connection: 300 idle connections, after their handshake,
    hold a few MiB in all, and give them back when they close."""
    process = psutil.Process(server.process.pid)
    socks = []
    try:
        for _ in range(20):  # warm-up: the loop's first connections allocate its buffers
            socks.append(socket.create_connection(("127.0.0.1", server.grpc_port)))
            socks[-1].sendall(PREFACE + hf.SettingsFrame(0).serialize())
        time.sleep(0.5)
        before = process.memory_info().rss
        for _ in range(300):
            socks.append(socket.create_connection(("127.0.0.1", server.grpc_port)))
            socks[-1].sendall(PREFACE + hf.SettingsFrame(0).serialize())
        time.sleep(1.0)
        per_connection = (process.memory_info().rss - before) / 300
    finally:
        for sock in socks:
            sock.close()
    assert per_connection < 32 * 1024, f"{per_connection / 1024:.0f} KiB a connection"
    served(server)


def test_compressed_messages_held_open_stay_compressed(server: RunningServer) -> None:
    """24 calls each send a 7 KiB gzip message that inflates to 7 MiB and never end their
    stream: what is held is what was sent, not 170 MiB of inflated bytes."""
    process = psutil.Process(server.process.pid)
    bomb = gzip.compress(bytes(7 * 1024 * 1024))
    assert len(bomb) < 16 * 1024
    framed = b"\x01" + len(bomb).to_bytes(4, "big") + bomb
    before = process.memory_info().rss
    with Attacker(server.grpc_port) as attacker:
        ids = list(range(1, 2 * 24, 2))
        for stream_id in ids:
            attacker.send_frames(attacker.opening(stream_id, [*REQUEST, ("grpc-encoding", "gzip")]))
            attacker.data(stream_id, framed, end_stream=False)
        attacker.send_frames(hf.PingFrame(0, opaque_data=b"12345678"))
        while not any(f.kind == 0x6 and f.flags & 0x1 for f in attacker.frames):
            assert attacker.read_frame() is not None  # every message has been read
        grown = process.memory_info().rss - before
        assert grown < 32 * 1024 * 1024, f"RSS grew {grown / 2**20:.0f} MiB"
    served(server)


def test_a_response_its_client_never_takes_is_reset_after_the_send_timeout(
    server: RunningServer,
) -> None:
    """The client's windows stay at 0: the 1 MiB answer cannot move; after
    --grpc-send-timeout (1 s here) the call is reset and its buffers let go."""
    request = pb.ModelInferRequest(model_name="identity")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[256 * 1024])
    request.raw_input_contents.append(bytes(1024 * 1024))
    with Attacker(server.grpc_port) as attacker:
        attacker.give_back = False
        attacker.send_frames(hf.SettingsFrame(0, settings={0x4: 0}))  # INITIAL_WINDOW_SIZE 0
        start = time.monotonic()
        attacker.send_frames(attacker.opening(1))
        attacker.data(1, grpc_message(request.SerializeToString()))
        assert attacker.reset_code(1) == 0x8  # CANCEL
        assert 0.9 < time.monotonic() - start < 10
        attacker.send_frames(attacker.opening(3))
        attacker.send(raw(0x0, 0x1, 3, tiny_message()))
        # A small answer still fits the connection's window: the connection serves on.
        attacker.send_frames(hf.WindowUpdateFrame(0, window_increment=1 << 20))
        attacker.send_frames(hf.WindowUpdateFrame(3, window_increment=1 << 20))
        assert attacker.until_closed(3).status() == OK
    served(server)


def test_metadata_over_the_limit_refuses_its_call_and_keeps_the_connection(
    server: RunningServer,
) -> None:
    """20 fields of 900 bytes (past the 16 KiB default): that call gets RESOURCE_EXHAUSTED,
    as grpcio's C core answers, and the same connection serves the next call, whose header
    block names by index a field the refused call added to the HPACK table."""
    request = grpc_message(pb.ServerLiveRequest().SerializeToString())
    metadata = [(f"x-m{index}", str(index) * 900) for index in range(20)]
    with RawClient(server.grpc_port) as client:
        refused = client.headers("ServerLive", extra=metadata, split=16_000)
        client.data(refused, request)
        answer = client.until_closed(refused)
        assert answer.status() == 8  # RESOURCE_EXHAUSTED
        assert "exceeds the limit" in answer.message() and "16384" in answer.message()
        served_here = client.headers("ServerLive", extra=metadata[-1:])
        client.data(served_here, request)
        answer = client.until_closed(served_here)
        assert answer.status() == OK
        assert pb.ServerLiveResponse.FromString(answer.messages()[0]).live
    served(server)
