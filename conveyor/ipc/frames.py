"""Frames between Conveyor's processes: a pickle, tensors beside it.

A frame is ``<kind u8><meta length u32><buffer count u32><buffer lengths u64...>``, then
the meta (a pickle, protocol 5), then each out-of-band buffer as raw bytes. numpy arrays
hand their memory to pickle as out-of-band buffers, so a tensor is written to the socket
as it lies in memory and read back into one bytes object that the array then views: never
encoded, never converted per element.

``kind`` says how to read the meta: :data:`PICKLED`, any picklable message (the
front-end link's control calls, the process instances' loads and batches), or one of the
hot infer call and reply of ``conveyor/server/workers/infer_frames.py``, whose meta is a
tuple of plain values only (no class to look up, no reducer to call). The blocking
:class:`~conveyor.ipc.channel.Channel` carries whole frames one at a time;
:class:`FrameReader` cuts frames out of the bytes of a multiplexed asynchronous
connection, however its reads split them.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import struct
from typing import Any

import numpy as np

Buffer = bytes | memoryview  # a frame's meta or a tensor: read-only bytes
PREFIX = struct.Struct("<BII")
PICKLED = 0  # a message of messages.py; the other kinds are infer_frames.py's
_LENGTH = struct.Struct("<Q")
# A message (not its tensors) larger than this is a bug or a corrupt stream, not a request.
MAX_META_BYTES = 64 << 20


# Tensors smaller than this ride inside the pickle: one copy of a few bytes is cheaper than
# one more part to write and read.
IN_BAND_BYTES = 16 << 10


def _array(dtype: str, shape: tuple[int, ...], data: Any) -> np.ndarray:
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def _dataclass_fields(kind: type) -> tuple[str, ...] | None:
    """The field names of a dataclass that is rebuilt from them all, else None (cached)."""
    names = _FIELDS.get(kind)
    if names is None and kind not in _FIELDS:
        fields = dataclasses.fields(kind) if dataclasses.is_dataclass(kind) else ()
        ok = fields and all(f.init for f in fields)
        names = tuple(f.name for f in fields) if ok else None
        _FIELDS[kind] = names
    return names


_FIELDS: dict[type, tuple[str, ...] | None] = {}
_PLAIN_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex


class _Pickler(pickle.Pickler):
    """Faster for what a call carries: numpy's own reduce and a slotted dataclass's
    generic one cost tens of microseconds each; these take a few."""

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is np.ndarray:
            # Plain numbers only: an extension dtype (BF16 from ml_dtypes) is not rebuilt
            # from its dtype string, so numpy's own reduce keeps it.
            if obj.dtype.kind not in _PLAIN_KINDS or not obj.flags.c_contiguous:
                return NotImplemented
            return _array, (obj.dtype.str, obj.shape, pickle.PickleBuffer(obj))
        if kind.__module__.startswith("conveyor."):
            names = _dataclass_fields(kind)
            if names is not None:
                return kind, tuple(getattr(obj, name) for name in names)
        return NotImplemented


def _keep_in_band(buffer: pickle.PickleBuffer) -> bool:
    return buffer.raw().nbytes < IN_BAND_BYTES


def frame_parts(message: object) -> list[bytes | memoryview]:
    """The frame of ``message`` as parts to write in order (large tensors are not copied)."""
    buffers: list[pickle.PickleBuffer] = []

    def callback(buffer: pickle.PickleBuffer) -> bool:
        if _keep_in_band(buffer):
            return True
        buffers.append(buffer)
        return False

    sink = io.BytesIO()
    _Pickler(sink, protocol=5, buffer_callback=callback).dump(message)
    meta = sink.getbuffer()
    raws = [b.raw() for b in buffers]
    return frame(PICKLED, meta, raws)


def frame(kind: int, meta: bytes | memoryview, raws: list[memoryview]) -> list[bytes | memoryview]:
    """A frame of ``kind`` as parts to write in order."""
    lengths = b"".join(_LENGTH.pack(r.nbytes) for r in raws) if raws else b""
    return [PREFIX.pack(kind, len(meta), len(raws)) + lengths, meta, *raws]


def check_meta_length(meta_length: int) -> None:
    if meta_length > MAX_META_BYTES:
        raise ConnectionError(f"a frame's message is {meta_length} bytes, over the limit")


class FrameReader:
    """Cuts whole frames out of a stream of reads: ``feed`` each read's bytes, get back
    every frame they completed as ``(kind, meta, buffers)``, in order. A frame may arrive
    split at any byte, and one read may complete many frames (all answered in one go).

    Frames wholly inside one read are views of that read's bytes (immutable, so nothing
    is copied); only a frame split across reads is gathered into a buffer first."""

    def __init__(self) -> None:
        self._partial = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, Buffer, list[Buffer]]]:
        if self._partial:
            self._partial += data
            # Copied out: the buffer is reused for the next reads.
            frames, used = _cut(self._partial, copy=True)
            del self._partial[:used]
            return frames
        frames, used = _cut(data, copy=False)
        if used < len(data):
            self._partial += memoryview(data)[used:]
        return frames


def _cut(data: bytes | bytearray, copy: bool) -> tuple[list[tuple[int, Buffer, list[Buffer]]], int]:
    """The whole frames at the start of ``data`` and how many bytes they span."""
    frames: list[tuple[int, Buffer, list[Buffer]]] = []
    at = 0
    size = len(data)
    with memoryview(data) as view:  # released before a bytearray is resized
        while size - at >= PREFIX.size:
            kind, meta_length, count = PREFIX.unpack_from(data, at)
            check_meta_length(meta_length)
            start = at + PREFIX.size + 8 * count
            if size < start:
                break
            lengths = struct.unpack_from(f"<{count}Q", data, at + PREFIX.size)
            end = start + meta_length + sum(lengths)
            if size < end:
                break
            parts: list[Buffer] = []
            for n in (meta_length, *lengths):
                part = view[start : start + n]
                parts.append(bytes(part) if copy else part)
                start += n
            frames.append((kind, parts[0], parts[1:]))
            at = end
    return frames, at
