"""A gRPC client at the frame level: a socket, HTTP/2 frames written by hand, hpack for the
header blocks. Lets a test do what a real client never would (garbage, tiny windows, resets)
and see every frame the server sends back.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from dataclasses import dataclass, field

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 3, 4, 6, 7, 8, 9,
)  # fmt: skip
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 0x4, 0x5
SERVICE = "/inference.GRPCInferenceService/"


@dataclass
class Frame:
    kind: int
    flags: int
    stream_id: int
    payload: bytes


@dataclass
class Answer:
    """What came back on one stream."""

    headers: list[tuple[str, str]] = field(default_factory=list)
    trailers: list[tuple[str, str]] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    reset: int | None = None  # RST_STREAM's error code
    ended: bool = False  # END_STREAM (with its whole header block) or RST_STREAM came
    _ending: bool = False  # END_STREAM came on HEADERS whose block continues

    def status(self) -> int:
        fields = dict(self.trailers or self.headers)
        return int(fields["grpc-status"])

    def message(self) -> str:
        return dict(self.trailers or self.headers).get("grpc-message", "")

    def messages(self) -> list[bytes]:
        out, at = [], 0
        while at < len(self.data):
            length = int.from_bytes(self.data[at + 1 : at + 5], "big")
            out.append(bytes(self.data[at + 5 : at + 5 + length]))
            at += 5 + length
        return out


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I B I", len(payload) << 8 | kind, flags, stream_id) + payload


def grpc_message(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


class RawClient:
    def __init__(
        self, port: int, *, window: int = 65_535, settings: bool = True, give_back: bool = True
    ) -> None:
        """``give_back``: answer each DATA frame with WINDOW_UPDATEs of its size, as a client
        that reads everything does (off: the test manages the windows itself)."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.buffer = b""
        self.window = window
        self.give_back = give_back
        self.frames: list[Frame] = []  # every frame read, in order
        self.server_settings: dict[int, int] = {}
        self.answers: dict[int, Answer] = {}
        self._block = b""  # a header block being continued
        self._next_stream = 1
        if settings:
            self.send(PREFACE)
            payload = struct.pack(">HI", INITIAL_WINDOW_SIZE, window)
            self.send(frame(SETTINGS, 0, 0, payload))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _reply(self, data: bytes) -> None:
        """An automatic answer (ACK, WINDOW_UPDATE): the server may have closed already."""
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.sock.sendall(data)

    def new_stream(self) -> int:
        stream_id = self._next_stream
        self._next_stream += 2
        self.answers[stream_id] = Answer()
        return stream_id

    def headers(
        self,
        method: str,
        *,
        extra: list[tuple[str, str]] | None = None,
        end_stream: bool = False,
        split: int | None = None,
        path: str | None = None,
    ) -> int:
        """Open a stream calling ``method``; ``split``: send the block in pieces of that many
        bytes (HEADERS, then CONTINUATION frames)."""
        stream_id = self.new_stream()
        fields = [
            (":method", "POST"), (":scheme", "http"), (":path", path or SERVICE + method),
            (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
            *(extra or []),
        ]  # fmt: skip
        block = self.encoder.encode(fields)
        pieces = (
            [block]
            if split is None
            else [block[i : i + split] for i in range(0, len(block), split)]
        )
        for index, piece in enumerate(pieces):
            flags = END_HEADERS if index == len(pieces) - 1 else 0
            if index == 0:
                self.send(
                    frame(HEADERS, flags | (END_STREAM if end_stream else 0), stream_id, piece)
                )
            else:
                self.send(frame(CONTINUATION, flags, stream_id, piece))
        return stream_id

    def data(
        self, stream_id: int, payload: bytes, *, end_stream: bool = True, size: int = 16_384
    ) -> None:
        pieces = [payload[i : i + size] for i in range(0, len(payload), size)] or [b""]
        for index, piece in enumerate(pieces):
            last = index == len(pieces) - 1
            self.send(frame(DATA, END_STREAM if last and end_stream else 0, stream_id, piece))

    def call(self, method: str, message: bytes, **headers: object) -> Answer:
        stream_id = self.headers(method, **headers)  # type: ignore[arg-type]
        self.data(stream_id, grpc_message(message))
        return self.until_closed(stream_id)

    def reset(self, stream_id: int, code: int = 0x8) -> None:
        self.send(frame(RST_STREAM, 0, stream_id, code.to_bytes(4, "big")))

    # -- reading --------------------------------------------------------------------------

    def read_frame(self, timeout: float = 20.0) -> Frame | None:
        """The next frame; None when the server closed the connection."""
        self.sock.settimeout(timeout)
        while len(self.buffer) < 9 or len(self.buffer) < 9 + (
            int.from_bytes(self.buffer[:3], "big")
        ):
            try:
                chunk = self.sock.recv(1 << 20)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
        length = int.from_bytes(self.buffer[:3], "big")
        kind, flags = self.buffer[3], self.buffer[4]
        stream_id = int.from_bytes(self.buffer[5:9], "big") & 0x7FFF_FFFF
        payload, self.buffer = self.buffer[9 : 9 + length], self.buffer[9 + length :]
        received = Frame(kind, flags, stream_id, payload)
        self.frames.append(received)
        self._take(received)
        return received

    def _take(self, received: Frame) -> None:
        kind, stream_id, payload = received.kind, received.stream_id, received.payload
        if kind == SETTINGS and not received.flags & ACK:
            for at in range(0, len(payload), 6):
                key, value = struct.unpack_from(">HI", payload, at)
                self.server_settings[key] = value
            self._reply(frame(SETTINGS, ACK, 0))
        elif kind == PING and not received.flags & ACK:
            self._reply(frame(PING, ACK, 0, payload))
        elif kind in (HEADERS, CONTINUATION):
            answer = self.answers.setdefault(stream_id, Answer())
            if kind == HEADERS:
                self._block = b""
                answer._ending = bool(received.flags & END_STREAM)
            self._block += payload
            if received.flags & END_HEADERS:
                fields = list(self.decoder.decode(self._block))
                (answer.trailers if answer.headers else answer.headers).extend(fields)
                answer.ended = answer._ending
        elif kind == DATA:
            if self.give_back and payload:
                increment = len(payload).to_bytes(4, "big")
                self._reply(frame(WINDOW_UPDATE, 0, 0, increment))
                self._reply(frame(WINDOW_UPDATE, 0, stream_id, increment))
            answer = self.answers.setdefault(stream_id, Answer())
            answer.data += payload
            answer.ended = bool(received.flags & END_STREAM)
        elif kind == RST_STREAM:
            answer = self.answers.setdefault(stream_id, Answer())
            answer.reset = int.from_bytes(payload, "big")
            answer.ended = True

    def until_closed(self, stream_id: int, timeout: float = 20.0) -> Answer:
        """Read frames until ``stream_id`` ends (END_STREAM or RST_STREAM)."""
        deadline = time.monotonic() + timeout
        answer = self.answers.setdefault(stream_id, Answer())
        while not answer.ended:
            if time.monotonic() > deadline:
                raise TimeoutError(f"stream {stream_id} did not end")
            if self.read_frame(deadline - time.monotonic()) is None:
                raise ConnectionError(f"the server closed the connection; stream {stream_id} open")
        return answer

    def until_eof(self, timeout: float = 20.0) -> list[Frame]:
        """Every frame until the server closes the connection."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.read_frame(deadline - time.monotonic()) is None:
                return self.frames
        raise TimeoutError("the server kept the connection open")
