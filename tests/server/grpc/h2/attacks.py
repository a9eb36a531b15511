"""What the hostile HTTP/2 tests share: a raw attacker that sends hyperframe frames, a
tritonclient bystander that must keep being served while an attack runs, and the server's
footprint (RSS and file descriptors) read before, during and after.
"""

from __future__ import annotations

import contextlib
import gzip
import socket
import struct
import threading
import time

import hpack
import numpy as np
import psutil
import tritonclient.grpc as grpcclient
from hyperframe import frame as hf

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.testing import RunningServer
from tests.server.grpc.h2.raw_client import PREFACE, RawClient, grpc_message

MAX_STREAMS = 32
PROTOCOL_ERROR, FRAME_SIZE_ERROR, REFUSED_STREAM, ENHANCE_YOUR_CALM = 0x1, 0x6, 0x7, 0xB
GOAWAY, RST_STREAM = 0x7, 0x3
OK, INVALID_ARGUMENT, INTERNAL = 0, 3, 13
REQUEST = [
    (":method", "POST"), (":scheme", "http"),
    (":path", "/inference.GRPCInferenceService/ModelInfer"), (":authority", "localhost"),
    ("content-type", "application/grpc"), ("te", "trailers"),
]  # fmt: skip


def served(server: RunningServer) -> None:
    """Another client's call works."""
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        x = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
        x.set_data_from_numpy(np.ones((1, 16), np.float32))
        result = client.infer("tiny", [x], client_timeout=10)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 16), 2, np.float32))


class Bystander:
    """A tritonclient calling ``tiny`` in a loop while an attack runs; every call must
    succeed within its deadline."""

    def __init__(self, server: RunningServer) -> None:
        self._server = server
        self._stop = threading.Event()
        self.calls = 0
        self.failures: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with grpcclient.InferenceServerClient(f"127.0.0.1:{self._server.grpc_port}") as client:
            x = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
            x.set_data_from_numpy(np.ones((1, 16), np.float32))
            while not self._stop.is_set() and self.calls < 10_000:
                try:
                    client.infer("tiny", [x], client_timeout=5)
                    self.calls += 1
                except Exception as exc:
                    self.failures.append(str(exc))
                time.sleep(0.01)

    def __enter__(self) -> Bystander:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self.calls and not self.failures and time.monotonic() < deadline:
            time.sleep(0.01)  # the attack starts once the bystander is being served
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self.failures, self.failures[:3]
        assert self.calls > 0


def tiny_message() -> bytes:
    request = pb.ModelInferRequest(model_name="tiny")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    request.raw_input_contents.append(np.ones(16, np.float32).tobytes())
    return grpc_message(request.SerializeToString())


class Attacker(RawClient):
    """A raw client that sends hyperframe frames."""

    def __init__(self, port: int) -> None:
        super().__init__(port, settings=False)
        self.send(PREFACE + hf.SettingsFrame(0).serialize())
        self.hpack = hpack.Encoder()

    def __enter__(self) -> Attacker:
        return self

    def send_frames(self, *frames: hf.Frame) -> None:
        self.send(b"".join(frame.serialize() for frame in frames))

    def opening(
        self, stream_id: int, fields: list[tuple[str, str]] | None = None, *, end: bool = False
    ) -> hf.HeadersFrame:
        flags = ["END_HEADERS", *(["END_STREAM"] if end else [])]
        return hf.HeadersFrame(stream_id, self.hpack.encode(fields or REQUEST), flags=flags)

    def goaway_code(self, timeout: float = 20.0) -> int:
        """The code of the server's GOAWAY (it then closes the connection)."""
        for received in self.until_eof(timeout):
            if received.kind == GOAWAY:
                return int(struct.unpack(">II", received.payload[:8])[1])
        raise AssertionError("no GOAWAY before the connection closed")

    def reset_code(self, stream_id: int) -> int | None:
        return self.until_closed(stream_id).reset


def raw(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return struct.pack(">I B I", len(payload) << 8 | kind, flags, stream_id) + payload


def small_limits(transport: str) -> list[str]:
    """``conveyor serve`` options with limits an attack reaches fast, on ``transport``."""
    return [
        "--grpc-transport", transport,
        "--grpc-max-message-bytes", str(8 * 1024 * 1024),
        "--grpc-max-concurrent-streams", str(MAX_STREAMS),
        "--grpc-handshake-timeout", "1",
        "--grpc-send-timeout", "1",
    ]  # fmt: skip


class Footprint:
    """The server's RSS and open file descriptors: read before, sampled every 50 ms while
    an attack runs (the peak kept), and read again once the attacker has left."""

    def __init__(self, pid: int) -> None:
        self._process = psutil.Process(pid)
        self.rss_before, self.fds_before = self.read()
        self.rss_peak, self.fds_peak = self.rss_before, self.fds_before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def read(self) -> tuple[int, int]:
        return self._process.memory_info().rss, self._process.num_fds()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            rss, fds = self.read()
            self.rss_peak, self.fds_peak = max(self.rss_peak, rss), max(self.fds_peak, fds)

    def settled(self, rss_slack: int, fds_slack: int, timeout: float = 4.0) -> tuple[int, int]:
        """RSS and fds once both are back within the slack of before (polled: the server
        hands free memory back every 2 s); what they are at the timeout otherwise."""
        self._stop.set()
        self._thread.join(5)
        deadline = time.monotonic() + timeout
        while True:
            rss, fds = self.read()
            back = rss <= self.rss_before + rss_slack and fds <= self.fds_before + fds_slack
            if back or time.monotonic() > deadline:
                return rss, fds
            time.sleep(0.1)


# -- attacks that read no answer: the same bytes to either transport --------------------------


def _quietly_read(sock: socket.socket, seconds: float) -> None:
    """Read what the server answers for up to ``seconds`` (or until it closes), dropping it."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    with contextlib.suppress(OSError):
        while time.monotonic() < deadline:
            try:
                if not sock.recv(1 << 20):
                    return
            except TimeoutError:
                continue


def _send(attacker: Attacker, data: bytes) -> bool:
    """False once the server has closed the connection (or stopped reading for 5 s)."""
    attacker.sock.settimeout(5)
    try:
        attacker.sock.sendall(data)
    except OSError:
        return False
    return True


def rapid_reset(port: int) -> None:
    """3,000 streams opened and reset at once, in batches of 100."""
    with Attacker(port) as attacker:
        for start in range(1, 2 * 3000, 2 * 100):
            batch = b"".join(
                attacker.opening(stream_id).serialize()
                + hf.RstStreamFrame(stream_id, error_code=8).serialize()
                for stream_id in range(start, start + 2 * 100, 2)
            )
            if not _send(attacker, batch):
                break
        _quietly_read(attacker.sock, 1)


def ping_flood_unread(port: int) -> None:
    """Up to 2,000,000 PINGs (34 MB of ACKs owed) from a client that never reads, for at
    most 8 s."""
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(PREFACE + hf.SettingsFrame(0).serialize())
        pings = hf.PingFrame(0, opaque_data=bytes(8)).serialize() * 1000
        sock.settimeout(2)
        deadline = time.monotonic() + 8
        with contextlib.suppress(OSError):
            for _ in range(2000):
                if time.monotonic() > deadline:
                    break
                sock.sendall(pings)
    finally:
        sock.close()


def window_churn(port: int) -> None:
    """200 streams opened (the server takes its limit of them), then 2,000 SETTINGS frames
    that each change INITIAL_WINDOW_SIZE."""
    with Attacker(port) as attacker:
        openings = b"".join(attacker.opening(1 + 2 * i).serialize() for i in range(200))
        if _send(attacker, openings):
            churn = b"".join(
                hf.SettingsFrame(0, settings={0x4: 65_535 + i % 2}).serialize() for i in range(2000)
            )
            _send(attacker, churn)
        _quietly_read(attacker.sock, 1)


def table_entry_named_many_times(port: int) -> None:
    """One 4 KB HPACK table entry, then 100 streams whose headers name it 60 times each."""
    with Attacker(port) as attacker:
        first = attacker.hpack.encode([*REQUEST, ("x-big", "v" * 4000)])
        frames = [hf.HeadersFrame(1, first, flags=["END_HEADERS"]).serialize()]
        for index in range(1, 100):
            block = attacker.hpack.encode(REQUEST) + b"\xbe" * 60
            frames.append(hf.HeadersFrame(1 + 2 * index, block, flags=["END_HEADERS"]).serialize())
        _send(attacker, b"".join(frames))
        _quietly_read(attacker.sock, 1)


def empty_literal_blocks(port: int) -> None:
    """60 header blocks of 8,000 empty literal fields each (1.4 MiB of HPACK work)."""
    with Attacker(port) as attacker:
        for index in range(60):
            stream_id = 1 + 2 * index
            block = attacker.hpack.encode(REQUEST) + b"\x00\x00\x00" * 8000
            pieces = [block[at : at + 16_000] for at in range(0, len(block), 16_000)]
            frames = [raw(0x1, 0x4 if len(pieces) == 1 else 0, stream_id, pieces[0])]
            for at, piece in enumerate(pieces[1:], start=2):
                frames.append(raw(0x9, 0x4 if at == len(pieces) else 0, stream_id, piece))
            if not _send(attacker, b"".join(frames)):
                break
        _quietly_read(attacker.sock, 1)


def gzip_messages_held_open(port: int) -> None:
    """24 calls each send a 7 KiB gzip message that inflates to 7 MiB, and never end."""
    bomb = gzip.compress(bytes(7 * 1024 * 1024))
    framed = b"\x01" + len(bomb).to_bytes(4, "big") + bomb
    with Attacker(port) as attacker:
        for index in range(24):
            stream_id = 1 + 2 * index
            opening = attacker.opening(stream_id, [*REQUEST, ("grpc-encoding", "gzip")])
            if not _send(attacker, opening.serialize() + raw(0x0, 0, stream_id, framed)):
                break
        _quietly_read(attacker.sock, 2)


def silent_connections(port: int) -> None:
    """300 connections that never send their preface, held 2 s."""
    socks = []
    try:
        for _ in range(300):
            socks.append(socket.create_connection(("127.0.0.1", port)))
        time.sleep(2)
    finally:
        for sock in socks:
            sock.close()


def unread_error_answers(port: int) -> None:
    """2,000 calls with a 4,000-byte unsupported ``grpc-encoding`` (each answered with an
    error) from a client that never reads, for at most 8 s."""
    with Attacker(port) as attacker:
        attacker.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        fields = [*REQUEST, ("grpc-encoding", "z" * 4000)]
        deadline = time.monotonic() + 8
        for start in range(0, 2000, 50):
            if time.monotonic() > deadline:
                break
            frames = b"".join(
                attacker.opening(1 + 2 * index, fields, end=True).serialize()
                for index in range(start, start + 50)
            )
            if not _send(attacker, frames):
                break


def zero_window_large_answers(port: int) -> None:
    """INITIAL_WINDOW_SIZE 0, then 16 calls for a 1 MiB answer each that can never move;
    the client waits 3 s (past the send timeout) and leaves."""
    request = pb.ModelInferRequest(model_name="identity")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[256 * 1024])
    request.raw_input_contents.append(bytes(1024 * 1024))
    message = grpc_message(request.SerializeToString())
    with Attacker(port) as attacker:
        attacker.give_back = False
        frames = [hf.SettingsFrame(0, settings={0x4: 0}).serialize()]
        for index in range(16):
            stream_id = 1 + 2 * index
            frames.append(attacker.opening(stream_id).serialize())
            frames += [
                raw(
                    0x0,
                    0x1 if at + 16_384 >= len(message) else 0,
                    stream_id,
                    message[at : at + 16_384],
                )
                for at in range(0, len(message), 16_384)
            ]
        if _send(attacker, b"".join(frames)):
            _quietly_read(attacker.sock, 3)


def zeros_message(port: int) -> None:
    """One 4 MiB ModelInfer message of zero bytes."""
    with Attacker(port) as attacker:
        message = grpc_message(bytes(4 * 1024 * 1024))
        frames = [attacker.opening(1).serialize()]
        frames += [
            raw(0x0, 0x1 if at + 16_384 >= len(message) else 0, 1, message[at : at + 16_384])
            for at in range(0, len(message), 16_384)
        ]
        if _send(attacker, b"".join(frames)):
            _quietly_read(attacker.sock, 2)


ATTACKS = {
    "rapid reset": rapid_reset,
    "PING flood, never read": ping_flood_unread,
    "INITIAL_WINDOW_SIZE churn": window_churn,
    "one table entry named many times": table_entry_named_many_times,
    "empty literal header blocks": empty_literal_blocks,
    "gzip messages held open": gzip_messages_held_open,
    "300 silent connections": silent_connections,
    "error answers never read": unread_error_answers,
    "zero window, large answers": zero_window_large_answers,
    "4 MiB message of zeros": zeros_message,
}
