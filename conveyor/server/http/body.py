"""Request bodies: size limits and Content-Encoding, shared by both HTTP implementations.

The limit applies to what the server would hold: the declared Content-Length (checked
before reading anything), the bytes as they stream in, and the body once decompressed
(checked while inflating, so a small gzip bomb never expands past the limit).
"""

from __future__ import annotations

import zlib

from conveyor.errors import InvalidInput

# Only infer responses are compressed, as Triton does: tritonclient's asyncio client lets
# aiohttp send "Accept-Encoding: gzip, deflate" on every call but decompresses only infer
# responses itself. Small bodies gain nothing from compression and cost CPU.
COMPRESS_MIN_BYTES = 1024


class BodyTooLarge(InvalidInput):
    """The request body is over the limit; the rest of it is never read."""


def too_large(what: str, limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"request body is {what}; the limit is {limit} bytes (the server's --max-body-bytes)"
    )


def declared_length(value: bytes | None, limit: int) -> int | None:
    """The Content-Length header's value, refused before any reading when over ``limit``."""
    if value is None:
        return None
    if not value.strip().isdigit():
        raise InvalidInput(f"Content-Length {value!r} is not a number")
    length = int(value)
    if length > limit:
        raise too_large(f"{length} bytes", limit)
    return length


def decompress(
    body: bytes | bytearray | memoryview, encoding: bytes, limit: int
) -> bytes | bytearray | memoryview:
    name = encoding.strip().lower()
    if name in (b"", b"identity"):
        return body
    if name in (b"gzip", b"x-gzip"):
        wbits = 31
    elif name == b"deflate":
        # "deflate" means the zlib format (RFC 9110); a raw deflate stream is accepted too.
        zlib_header = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
        wbits = 15 if zlib_header else -15
    else:
        raise InvalidInput(
            f"Content-Encoding {encoding.decode('latin-1')!r} is not supported; "
            "use gzip, deflate or none"
        )
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise InvalidInput(f"request body is not valid {name.decode()}: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise too_large(f"more than {limit} bytes once decompressed", limit)
    if not inflater.eof:
        raise InvalidInput(f"request body is a truncated {name.decode()} stream")
    return out


def accepted_encoding(accept: bytes) -> bytes | None:
    """gzip or deflate if the client accepts one (q > 0), gzip first; else None."""
    offered: dict[bytes, float] = {}
    for item in accept.lower().split(b","):
        token, _, params = item.strip().partition(b";")
        quality = 1.0
        params = params.strip()
        if params.startswith(b"q="):
            try:
                quality = float(params[2:])
            except ValueError:
                quality = 0.0
        offered[token.strip()] = quality
    for name in (b"gzip", b"deflate"):
        if offered.get(name, 0.0) > 0:
            return name
    return None


def compress(body: bytes, encoding: bytes) -> bytes:
    # Level 1: on tensor-sized bodies the fastest level gets most of the gain.
    wbits = 31 if encoding == b"gzip" else 15
    compressor = zlib.compressobj(1, zlib.DEFLATED, wbits)
    return compressor.compress(body) + compressor.flush()


def maybe_compress(
    path: str, status: int, body: bytes, accept: bytes | None
) -> tuple[bytes, bytes | None]:
    """Compress an infer response when the client accepts it; returns (body, encoding)."""
    if accept is None or status != 200 or len(body) < COMPRESS_MIN_BYTES:
        return body, None
    if not path.endswith("/infer"):
        return body, None
    chosen = accepted_encoding(accept)
    if chosen is None:
        return body, None
    return compress(body, chosen), chosen
