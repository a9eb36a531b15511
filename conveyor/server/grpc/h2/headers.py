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


class HeaderListTooLarge(HeaderBlockError):
    """A header block that decodes past the decoding cap (decoding stopped there, so the
    connection's table may be out of step with the client's: the connection must end)."""


# A block is decoded to its end up to this many times the header-list limit: one over the
# limit but within it leaves the table in step and is refused on its own stream (as gRPC's
# C core refuses metadata past its limits with RESOURCE_EXHAUSTED and keeps the
# connection); past it, decoding stops (a few bytes a field naming one large table entry
# must not decode to megabytes) and the connection ends.
DECODE_HEADROOM = 4


# Request pseudo-headers (RFC 9113 8.3.1) and fields that HTTP/2 forbids (8.2.2).
_PSEUDO = frozenset((b":method", b":scheme", b":path", b":authority"))
_REQUIRED = (b":method", b":scheme", b":path")
_CONNECTION_SPECIFIC = frozenset(
    (b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade")
)


class Decoded:
    """One decoded request header block: its fields, their size by HPACK's measure (name +
    value + 32 each), and why it is a malformed request (RFC 9113 8.1.1), or ""."""

    __slots__ = ("_request", "fields", "malformed", "method", "size")

    def __init__(self, fields: Fields) -> None:
        self.fields = fields
        self.size = sum(len(name) + len(value) + 32 for name, value in fields)
        self.method = b""
        self.malformed = self._check()
        self._request: RequestHeaders | None = None

    def request(self) -> RequestHeaders:
        """What the fields say to gRPC, read once: a cached block (a client repeating a
        call) gives every call the same, unchanging :class:`RequestHeaders`."""
        request = self._request
        if request is None:
            request = self._request = RequestHeaders(self.fields)
        return request

    def _check(self) -> str:
        seen: set[bytes] = set()
        regular = False
        for name, value in self.fields:
            if name[:1] == b":":
                if regular:
                    return f"pseudo-header {name!r} after a regular field"
                if name not in _PSEUDO:
                    return f"unknown pseudo-header {name!r}"
                if name in seen:
                    return f"pseudo-header {name!r} twice"
                seen.add(name)
                if name == b":method":
                    self.method = value
                continue
            regular = True
            if name != name.lower():
                return f"field name {name!r} is not lowercase"
            if name in _CONNECTION_SPECIFIC:
                return f"connection-specific field {name!r}"
            if name == b"te" and value != b"trailers":
                return f"te: {value!r} (only 'trailers' is allowed)"
        for name in _REQUIRED:
            if name not in seen:
                return f"no {name.decode()} pseudo-header"
        return ""


# Blocks decoding to more than this are not cached: the cache of a connection stays small.
_CACHED_SIZE = 2048


class HeaderDecoder:
    """Decodes a connection's header blocks, from a cache while the dynamic table is unchanged.

    A client repeating a call sends the same few bytes (indexed fields) each time; their
    meaning changes only when the table does, so the cache is emptied whenever it does.
    A block is decoded whole up to ``DECODE_HEADROOM`` times ``max_header_list_size`` bytes
    of fields (its caller refuses one past the limit by ``Decoded.size``); decoding stops
    past that: a block of a few bytes per field that names one large table entry many times
    is not decoded to megabytes.
    """

    __slots__ = ("_decoded", "_decoder")

    def __init__(self, max_header_list_size: int) -> None:
        self._decoder = hpack.Decoder()
        self._decoder.max_header_list_size = DECODE_HEADROOM * max_header_list_size
        self._decoded: dict[bytes, Decoded] = {}

    def decode(self, block: bytes) -> Decoded:
        cached = self._decoded.get(block)
        if cached is not None:
            return cached
        entries = self._decoder.header_table.dynamic_entries
        before = (len(entries), id(entries[0]) if entries else 0)
        try:
            fields = cast(Fields, self._decoder.decode(block, raw=True))
        except hpack.OversizedHeaderListError:
            limit = self._decoder.max_header_list_size
            raise HeaderListTooLarge(
                f"a header list decoding to over {limit} bytes ({DECODE_HEADROOM} times "
                "SETTINGS_MAX_HEADER_LIST_SIZE)"
            ) from None
        except Exception as exc:  # hpack's errors
            raise HeaderBlockError(f"bad header block: {exc}") from None
        decoded = Decoded(fields)
        if (len(entries), id(entries[0]) if entries else 0) != before:
            self._decoded.clear()
        elif len(self._decoded) < 64 and decoded.size <= _CACHED_SIZE:
            self._decoded[block] = decoded
        return decoded


class RequestHeaders:
    """What a call's HEADERS say: its method's path, content type, message encoding,
    ``grpc-timeout`` (seconds, None when absent) and metadata (``-bin`` values decoded).
    Read-only once made: calls whose header blocks are the same share one."""

    __slots__ = ("bad_timeout", "content_type", "encoding", "metadata", "path", "timeout")

    def __init__(self, fields: Fields) -> None:
        self.path = ""
        self.content_type = b""
        self.encoding = b""
        self.timeout: float | None = None
        self.bad_timeout = b""  # a grpc-timeout value that does not parse
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
                if self.timeout is None:
                    self.bad_timeout = value
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
