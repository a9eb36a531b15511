"""BYTES tensors on the wire: each element is a 4-byte little-endian length, then its bytes.

This is the layout of the HTTP binary extension and of gRPC ``raw_input_contents``. A
BYTES tensor in memory is a numpy object array of ``bytes``. Decoding checks every length
against the buffer it sits in, so a prefix that points past the end is an InvalidInput
naming the element, never a read past the buffer or an allocation of the claimed size.
"""

from __future__ import annotations

import struct

import numpy as np

from conveyor.errors import InvalidInput

BytesLike = bytes | bytearray | memoryview

_LENGTH = struct.Struct("<I")
_PREFIX = _LENGTH.size


def decode(
    buffer: BytesLike, count: int | None = None, *, offset: int = 0, size: int | None = None
) -> np.ndarray:
    """Decode ``buffer[offset:offset+size]`` into a flat object array of ``bytes``.

    ``count`` is the number of elements the tensor's shape promises; the buffer must hold
    exactly that many, with no bytes left over. With ``count`` None, every element in the
    buffer is decoded.
    """
    view = memoryview(buffer).cast("B")
    end = len(view) if size is None else offset + size
    if offset < 0 or end > len(view) or end < offset:
        raise InvalidInput(f"BYTES data [{offset}, {end}) lies outside a {len(view)}-byte buffer")
    elements: list[bytes] = []
    append = elements.append
    unpack = _LENGTH.unpack_from
    position = offset
    limit = count if count is not None else -1
    while position < end and len(elements) != limit:
        if position + _PREFIX > end:
            raise InvalidInput(
                f"BYTES element {len(elements)}: its 4-byte length prefix at byte "
                f"{position - offset} runs past the end of the {end - offset}-byte data"
            )
        (length,) = unpack(view, position)
        position += _PREFIX
        if position + length > end:
            raise InvalidInput(
                f"BYTES element {len(elements)}: length prefix says {length} bytes but only "
                f"{end - position} remain in the {end - offset}-byte data"
            )
        append(view[position : position + length].tobytes())
        position += length
    if count is not None and len(elements) != count:
        raise InvalidInput(f"BYTES data holds {len(elements)} elements but the shape needs {count}")
    if position != end:
        raise InvalidInput(
            f"BYTES data has {end - position} bytes left over after its {len(elements)} elements"
        )
    out = np.empty(len(elements), dtype=object)
    out[:] = elements
    return out


def encode(array: np.ndarray) -> bytes:
    """Serialize a tensor of bytes (or str, encoded as UTF-8) in row-major order, in one join."""
    pack = _LENGTH.pack
    pieces: list[bytes] = []
    append = pieces.append
    for item in np.asarray(array).reshape(-1).tolist():
        data = as_bytes(item)
        append(pack(len(data)))
        append(data)
    return b"".join(pieces)


def encoded_size(array: np.ndarray) -> int:
    return sum(_PREFIX + len(as_bytes(item)) for item in np.asarray(array).reshape(-1).tolist())


def as_bytes(item: object) -> bytes:
    """One BYTES element as bytes: bytes as is, str as UTF-8, anything else refused."""
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode()
    if isinstance(item, bytearray | memoryview | np.bytes_):
        return bytes(item)
    raise InvalidInput(f"a BYTES element must be bytes or str, got {type(item).__name__}")
