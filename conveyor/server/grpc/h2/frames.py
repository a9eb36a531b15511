"""HTTP/2 framing for gRPC (RFC 9113): frame headers, settings, precomputed header blocks,
and DATA payloads cut from a message's pieces.

Only what one gRPC service needs. Responses never touch an HPACK encoder: their header blocks
are "literal without indexing" fields (RFC 7541 section 6.2.2) written once here, so the
server keeps no encoder state and a trailer costs one ``bytes`` join.
"""

from __future__ import annotations

import struct
import urllib.parse
from typing import Any

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types.
DATA = 0x0
HEADERS = 0x1
PRIORITY = 0x2
RST_STREAM = 0x3
SETTINGS = 0x4
PUSH_PROMISE = 0x5
PING = 0x6
GOAWAY = 0x7
WINDOW_UPDATE = 0x8
CONTINUATION = 0x9

# Flags.
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# Settings.
SETTINGS_HEADER_TABLE_SIZE = 0x1
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
SETTINGS_MAX_FRAME_SIZE = 0x5
SETTINGS_MAX_HEADER_LIST_SIZE = 0x6

# Error codes.
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB

DEFAULT_WINDOW = 65_535
DEFAULT_MAX_FRAME = 16_384
MAX_WINDOW = 2**31 - 1

_HEADER = struct.Struct(">I B I")  # 24-bit length (in the top of the int), type, flags, id
_U32 = struct.Struct(">I")
_GOAWAY = struct.Struct(">II")
_SETTING = struct.Struct(">HI")


def frame_header(length: int, kind: int, flags: int, stream_id: int) -> bytes:
    """The 9 bytes in front of a frame's payload."""
    return _HEADER.pack(length << 8 | kind, flags, stream_id)


def parse_header(data: bytes | bytearray | memoryview, at: int) -> tuple[int, int, int, int]:
    """(length, type, flags, stream id) of the frame header at ``data[at:at + 9]``."""
    length_type, flags, stream_id = _HEADER.unpack_from(data, at)
    return length_type >> 8, length_type & 0xFF, flags, stream_id & 0x7FFF_FFFF


def settings(values: dict[int, int]) -> bytes:
    payload = b"".join(_SETTING.pack(key, value) for key, value in values.items())
    return frame_header(len(payload), SETTINGS, 0, 0) + payload


def parse_settings(payload: bytes | memoryview) -> list[tuple[int, int]]:
    return [_SETTING.unpack_from(payload, at) for at in range(0, len(payload) - 5, 6)]


SETTINGS_ACK = frame_header(0, SETTINGS, ACK, 0)


def window_update(stream_id: int, increment: int) -> bytes:
    return frame_header(4, WINDOW_UPDATE, 0, stream_id) + _U32.pack(increment)


def rst_stream(stream_id: int, code: int) -> bytes:
    return frame_header(4, RST_STREAM, 0, stream_id) + _U32.pack(code)


def goaway(last_stream_id: int, code: int, debug: bytes = b"") -> bytes:
    return frame_header(8 + len(debug), GOAWAY, 0, 0) + _GOAWAY.pack(last_stream_id, code) + debug


def read_u32(payload: bytes | memoryview) -> int:
    value: int = _U32.unpack_from(payload, 0)[0]
    return value


def read_goaway(payload: bytes | memoryview) -> tuple[int, int]:
    last, code = _GOAWAY.unpack_from(payload, 0)
    return last & 0x7FFF_FFFF, code


# -- header blocks ------------------------------------------------------------------------


def _integer(value: int, prefix_bits: int, first: int) -> bytes:
    """An HPACK integer (RFC 7541 5.1) whose first byte carries ``first`` above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(value: bytes) -> bytes:
    return _integer(len(value), 7, 0) + value  # not Huffman-coded


def literal(name: bytes, value: bytes) -> bytes:
    """One "literal without indexing, new name" field."""
    return b"\x00" + _string(name) + _string(value)


def literal_indexed_name(index: int, value: bytes) -> bytes:
    """One "literal without indexing" field whose name is static table entry ``index``."""
    return _integer(index, 4, 0) + _string(value)


_STATUS_200 = b"\x88"  # static table entry 8, ":status: 200", indexed
_CONTENT_TYPE = 31  # static table entry "content-type"

RESPONSE_HEADERS = _STATUS_200 + literal_indexed_name(_CONTENT_TYPE, b"application/grpc")
UNSUPPORTED_MEDIA_TYPE = literal_indexed_name(8, b"415")  # ":status" name, value 415
METHOD_NOT_ALLOWED = literal_indexed_name(8, b"405")


def status_fields(code: int, message: str = "") -> bytes:
    """``grpc-status`` and, when there is one, the percent-encoded ``grpc-message``."""
    block = literal(b"grpc-status", str(code).encode())
    if message:
        block += literal(b"grpc-message", percent_encode(message))
    return block


OK_TRAILERS = status_fields(0)


def percent_encode(message: str) -> bytes:
    """gRPC's percent-encoding of a status message: UTF-8, bytes outside ' '..'~' and '%'."""
    return urllib.parse.quote(message, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~").encode()


def parse_timeout(value: str) -> float | None:
    """Seconds in a ``grpc-timeout`` value ("100m", "5S"...); None when it does not parse
    (gRPC's spec: at most 8 ASCII digits, then one unit)."""
    units = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
    digits = value[:-1]
    if not 1 <= len(digits) <= 8 or value[-1] not in units:
        return None
    if not (digits.isascii() and digits.isdigit()):
        return None
    return int(value[:-1]) * units[value[-1]]


# -- messages in pieces ---------------------------------------------------------------


class PieceCursor:
    """Reads consecutive byte ranges across a list of buffers, as views (no copies)."""

    __slots__ = ("_index", "_offset", "_pieces")

    def __init__(self, pieces: list[memoryview]) -> None:
        self._pieces = pieces
        self._index = 0
        self._offset = 0

    def take(self, count: int) -> list[memoryview]:
        out = []
        while count:
            piece = self._pieces[self._index]
            taken = min(count, len(piece) - self._offset)
            out.append(piece[self._offset : self._offset + taken])
            self._offset += taken
            count -= taken
            if self._offset == len(piece):
                self._index += 1
                self._offset = 0
        return out


def byte_view(piece: Any) -> Any:
    """``piece`` as something a transport writes whose len() is its size in bytes."""
    if isinstance(piece, bytes):
        return piece
    view = memoryview(piece)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def message_prefix(size: int) -> bytes:
    """gRPC's 5 bytes in front of a message: not compressed, then its length."""
    return b"\x00" + size.to_bytes(4, "big")
