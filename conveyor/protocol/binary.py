"""The binary tensor extension's framing, independent of any transport.

A request or response body is a JSON header followed by a binary tail; the header's length
travels beside the body (HTTP: the ``Inference-Header-Content-Length`` header). Each tensor
that travels in binary says its byte count in ``parameters.binary_data_size``, and the tail
is those tensors' bytes back to back, in the order the tensors appear in the header.

Decoding is ``numpy.frombuffer`` on the body itself: no copy, no per-element work, and the
byte count a shape implies is checked against ``binary_data_size`` before anything of that
size exists. Encoding joins the header and each tensor's buffer into one body, so every
output is written exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from conveyor.errors import InvalidInput
from conveyor.protocol import bytes_codec
from conveyor.protocol import triton_words as triton
from conveyor.protocol.datatypes import BYTES, element_count, element_size, numpy_dtype

BytesLike = bytes | bytearray | memoryview
# What a body is joined from: bytes, or a flat uint8 numpy view of a tensor.
Chunk = bytes | bytearray | memoryview | np.ndarray

HEADER_LENGTH_HEADER = "Inference-Header-Content-Length"


def parse_header_length(value: str | bytes | None, body_length: int) -> int | None:
    """The JSON header's length from its header value; None when the value is absent."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    digits = text.strip(" \t")  # HTTP's optional whitespace, nothing else
    # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
    if not (digits.isascii() and digits.isdigit()):
        raise InvalidInput(f"{HEADER_LENGTH_HEADER} must be a non-negative integer, got {text!r}")
    length = int(digits)
    if length > body_length:
        raise InvalidInput(
            f"{HEADER_LENGTH_HEADER} is {length} but the body has only {body_length} bytes"
        )
    return length


def split(body: BytesLike, header_length: int | None) -> tuple[BytesLike, memoryview]:
    """Split a body into its JSON header and binary tail (empty when there is no tail)."""
    if header_length is None or header_length == len(body):
        return body, memoryview(b"")
    view = memoryview(body)
    return view[:header_length], view[header_length:]


class TailReader:
    """Hands out consecutive slices of a binary tail, one per tensor, in header order."""

    __slots__ = ("_offset", "tail")

    def __init__(self, tail: BytesLike) -> None:
        self.tail = tail
        self._offset = 0

    def take(self, size: int, where: str) -> int:
        """Reserve the next ``size`` bytes; returns their offset in the tail."""
        offset = self._offset
        if offset + size > len(self.tail):
            raise InvalidInput(
                f"{where}: binary_data_size {size} at offset {offset} runs past the end of the "
                f"{len(self.tail)}-byte binary data after the JSON header"
            )
        self._offset = offset + size
        return offset

    def finish(self) -> None:
        """Every byte of the tail must belong to some tensor."""
        if self._offset != len(self.tail):
            raise InvalidInput(
                f"the binary_data_size values add up to {self._offset} bytes but "
                f"{len(self.tail)} bytes follow the JSON header"
            )


def tensor(
    tail: BytesLike,
    offset: int,
    size: int,
    datatype: str,
    shape: tuple[int, ...],
    where: str,
    *,
    triton_names: tuple[str, str] | None = None,
) -> np.ndarray:
    """The tensor stored at ``tail[offset:offset+size]``, as a read-only view where possible.

    ``triton_names`` (model, input): a wrong size begins with Triton's words for it.
    """
    count = element_count(shape)
    if datatype == BYTES:
        return bytes_codec.decode(tail, count, offset=offset, size=size).reshape(shape)
    itemsize = element_size(datatype)
    assert itemsize is not None
    if count * itemsize != size:
        ours = (
            f"{where}: shape {list(shape)} of {datatype} needs {count * itemsize} bytes but "
            f"binary_data_size is {size}"
        )
        if triton_names is not None:
            words = triton.input_byte_size(*triton_names, count * itemsize, size)
            ours = triton.first(words, ours)
        raise InvalidInput(ours)
    return np.frombuffer(tail, numpy_dtype(datatype), count, offset).reshape(shape)


def tensor_bytes(array: np.ndarray, datatype: str) -> Chunk:
    """A tensor's wire bytes: raw row-major little-endian, or length-prefixed for BYTES."""
    if datatype == BYTES:
        return bytes_codec.encode(array)
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    # A flat uint8 view (not a memoryview: BF16 has no buffer format code); joins and
    # socket writes take it without another copy.
    return array.reshape(-1).view(np.uint8)


def join(header: bytes, buffers: Sequence[Chunk]) -> tuple[bytes, int]:
    """One body: the JSON header then each buffer, each copied once; and the header length."""
    if not buffers:
        return header, len(header)
    # numpy declares ndarray a Buffer only from Python 3.12 on; it is one on 3.11 too.
    return b"".join((header, *buffers)), len(header)  # type: ignore[arg-type]
