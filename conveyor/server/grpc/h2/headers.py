"""Request header blocks: HPACK decoding (the ``hpack`` package) and what a call needs of them.

HPACK's dynamic table is the one state a connection shares across its calls, so every block
is decoded, in order, by the connection's one :class:`HeaderDecoder`.
"""

from __future__ import annotations

import base64
from typing import cast

import hpack

from conveyor.server.grpc.h2.frames import parse_timeout

Fields = list[tuple[bytes, bytes]]
Metadata = tuple[tuple[str, str | bytes], ...]
# Headers every gRPC call carries that are not the call's metadata.
_NOT_METADATA = frozenset((b"te", b"user-agent", b"grpc-accept-encoding"))


class HeaderBlockError(Exception):
    """A header block HPACK cannot decode: the connection's table is unusable after it."""


class HeaderDecoder:
    """Decodes a connection's header blocks, from a cache while the dynamic table is unchanged.

    A client repeating a call sends the same few bytes (indexed fields) each time; their
    meaning changes only when the table does, so the cache is emptied whenever it does.
    """

    __slots__ = ("_decoded", "_decoder")

    def __init__(self, max_header_list_size: int) -> None:
        self._decoder = hpack.Decoder()
        self._decoder.max_header_list_size = max_header_list_size
        self._decoded: dict[bytes, Fields] = {}

    def decode(self, block: bytes) -> Fields:
        cached = self._decoded.get(block)
        if cached is not None:
            return cached
        entries = self._decoder.header_table.dynamic_entries
        before = (len(entries), id(entries[0]) if entries else 0)
        try:
            fields = cast(Fields, self._decoder.decode(block, raw=True))
        except Exception as exc:  # hpack's errors
            raise HeaderBlockError(f"bad header block: {exc}") from None
        if (len(entries), id(entries[0]) if entries else 0) != before:
            self._decoded.clear()
        elif len(self._decoded) < 64:
            self._decoded[block] = fields
        return fields


class RequestHeaders:
    """What a call's HEADERS say: its method's path, content type, message encoding,
    ``grpc-timeout`` (seconds, None when absent) and metadata (``-bin`` values decoded)."""

    __slots__ = ("content_type", "encoding", "metadata", "path", "timeout")

    def __init__(self, fields: Fields) -> None:
        self.path = ""
        self.content_type = b""
        self.encoding = b""
        self.timeout: float | None = None
        metadata: list[tuple[str, str | bytes]] = []
        for name, value in fields:
            if name[:1] == b":":
                if name == b":path":
                    self.path = value.decode("latin-1")
                continue
            if name == b"content-type":
                self.content_type = value
            elif name == b"grpc-timeout":
                self.timeout = parse_timeout(value.decode("latin-1"))
            elif name == b"grpc-encoding":
                self.encoding = value
            elif name in _NOT_METADATA:
                continue
            key = name.decode("latin-1")
            if key.endswith("-bin"):
                metadata.append((key, _unbase64(value)))
            else:
                metadata.append((key, value.decode("latin-1")))
        self.metadata: Metadata = tuple(metadata)

    def get(self, key: str) -> str | bytes | None:
        return next((value for name, value in self.metadata if name == key), None)


def _unbase64(value: bytes) -> bytes:
    try:
        return base64.b64decode(value + b"=" * (-len(value) % 4))
    except ValueError:
        return value
