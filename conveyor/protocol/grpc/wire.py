"""Raw tensor bytes in and out of infer messages without protobuf's copies.

protobuf copies a ``bytes`` field when it parses a message, again each time the field is
read, again when a field is set, and once more when the message is serialized: four copies of
every tensor for a 4 MiB input. These two functions frame the raw-contents field by hand
(protobuf's wire format: a key, a length, the bytes; a repeated field is that, once per
element, in any position) and leave every other field to protobuf:

- :func:`split_raw` parses a received message: the raw field's elements come back as
  memoryviews into the received bytes (no copy), the rest of the message is parsed by
  protobuf from the few bytes left.
- :func:`join_raw` serializes a message: protobuf encodes the small part, and each tensor is
  joined after it straight from its numpy buffer (one copy, the join itself);
  :func:`raw_parts` leaves the pieces unjoined, for a writer that sends a list of buffers.

Small messages take protobuf's own path, which is faster below a few KiB.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
from google.protobuf.message import DecodeError, Message

M = TypeVar("M", bound=Message)
BytesLike = bytes | memoryview | np.ndarray

# ModelInferRequest.raw_input_contents and ModelInferResponse.raw_output_contents.
RAW_INPUT_FIELD = 7
RAW_OUTPUT_FIELD = 6
# Below this many bytes protobuf's C parser beats a Python scan of the fields.
SMALL_MESSAGE = 32 * 1024
# Fields a big message is scanned for by hand before protobuf parses it whole instead: an
# infer request has a handful, plus one per input; a hostile one may have millions.
MAX_SCANNED_FIELDS = 4096

_LENGTH_DELIMITED = 2


def split_raw(
    data: bytes, message_class: type[M], field: int
) -> tuple[M, Sequence[bytes | memoryview]]:
    """Parse ``data``; return the message and the elements of its bytes field ``field``.

    For a big message the elements are views into ``data`` and the returned message lacks
    them; for a small one, or one of more than :data:`MAX_SCANNED_FIELDS` fields, they are
    the message's own field (protobuf parses it whole).

    The scan costs one step per field, not per byte, and keeps only the boundaries of the
    runs of other fields between two raw elements, so a message of a million tiny fields
    costs :data:`MAX_SCANNED_FIELDS` steps and then protobuf's C parser, not a million
    Python objects.
    """
    if len(data) < SMALL_MESSAGE:
        return _parsed_whole(data, message_class, field)
    view = memoryview(data)
    raw: list[bytes | memoryview] = []
    runs: list[tuple[int, int]] = []  # [start, end) of the other fields, between raw ones
    run_start = 0
    position, end = 0, len(data)
    scanned = 0
    while position < end:
        scanned += 1
        if scanned > MAX_SCANNED_FIELDS:
            return _parsed_whole(data, message_class, field)
        start = position
        key, position = _read_varint(data, position)
        number, kind = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0: not a protobuf message")
        if kind == _LENGTH_DELIMITED:
            length, position = _read_varint(data, position)
            if position + length > end:
                raise DecodeError("truncated message: a field runs past its end")
            if number == field:
                if start > run_start:
                    runs.append((run_start, start))
                raw.append(view[position : position + length])
                position += length
                run_start = position
                continue
            position += length
        elif kind == 0:
            _, position = _read_varint(data, position)
        elif kind == 1:
            position += 8
        elif kind == 5:
            position += 4
        else:
            raise DecodeError(f"unexpected wire type {kind} for field {number}")
    if position != end:
        raise DecodeError("truncated message")
    if run_start < end:
        runs.append((run_start, end))
    rest = b"".join([view[a:b] for a, b in runs])
    return message_class.FromString(rest), raw


def _parsed_whole(
    data: bytes, message_class: type[M], field: int
) -> tuple[M, Sequence[bytes | memoryview]]:
    message = message_class.FromString(data)
    return message, getattr(message, message.DESCRIPTOR.fields_by_number[field].name)


def join_raw(
    message: Message, field: int, buffers: Sequence[BytesLike], *, within: int | None = None
) -> bytes:
    """``message`` serialized with ``buffers`` as the elements of its bytes field ``field``.

    ``within``: the result is wrapped as that (message) field of an enclosing message, e.g.
    ModelStreamInferResponse.infer_response, in the same single join.
    """
    return b"".join(raw_parts(message, field, buffers, within=within))


def raw_parts(
    message: Message, field: int, buffers: Sequence[BytesLike], *, within: int | None = None
) -> list[Any]:
    """:func:`join_raw`'s pieces, not joined: a writer that takes a list of buffers (a socket's
    ``writelines``) sends each tensor straight from its numpy buffer, with no copy at all."""
    key = bytes(_varint(field << 3 | _LENGTH_DELIMITED))
    parts: list[Any] = [message.SerializeToString()]
    size = len(parts[0])
    for buffer in buffers:
        nbytes = buffer.nbytes if isinstance(buffer, np.ndarray | memoryview) else len(buffer)
        prefix = key + _varint(nbytes)
        parts.append(prefix)
        parts.append(buffer)
        size += len(prefix) + nbytes
    if within is not None:
        parts.insert(0, _varint(within << 3 | _LENGTH_DELIMITED) + _varint(size))
    return parts


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise DecodeError("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise DecodeError("varint too long")


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
