"""Shared-memory buffers that carry tensors between the engine and a worker process.

A buffer is a memfd: an anonymous file in RAM with no name in /dev/shm. Its fd is passed to
the peer once (over the channel, SCM_RIGHTS) and both processes map it; after that a request
only copies its tensors into the mapping and sends their offsets. Each worker slot keeps its
buffers and reuses them for every request, growing them (by replacement) only when a
request does not fit. Because a memfd has no name, nothing can be left behind: its memory is
freed when the last process holding a mapping or fd exits, however it exits (even SIGKILL).

Numeric tensors are raw bytes read back with ``numpy.ndarray(buffer=...)`` (``frombuffer``);
BYTES tensors (object arrays of bytes) are laid out as 4-byte little-endian lengths, each
followed by its element, the V2 binary encoding.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Mapping

import numpy as np

from conveyor.engine.processes.messages import TensorRef

MIN_SIZE = 1 << 16  # 64 KiB: small requests never cause a regrowth
_ALIGN = 64  # every tensor starts on a cache line
_LENGTH = struct.Struct("<I")


class SharedBuffer:
    """A buffer this process creates and writes; the peer maps it with :func:`attach`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.fd = -1
        self.size = 0
        self.map: mmap.mmap | None = None
        # Bumped whenever the memory is replaced: a peer that has mapped an older generation
        # needs the fd (again) before it can read what is written now.
        self.generation = 0

    def reserve(self, nbytes: int) -> None:
        """Make room for ``nbytes``, replacing the memory (a new generation) when too small."""
        if self.map is not None and nbytes <= self.size:
            return
        size = max(MIN_SIZE, 1 << (max(nbytes, 1) - 1).bit_length())
        fd = os.memfd_create(f"conveyor-{self.name}", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            mapping = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self.close()
        self.fd, self.size, self.map = fd, size, mapping
        self.generation += 1

    def close(self) -> None:
        if self.map is not None:
            unmap(self.map)
            self.map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.size = 0


def attach(fd: int, size: int) -> mmap.mmap:
    """Map a buffer the peer sent; the fd is closed (the mapping keeps the memory alive)."""
    try:
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def unmap(mapping: mmap.mmap) -> None:
    """Unmap now, or, while numpy views of it are still alive, when the last one goes."""
    with contextlib.suppress(BufferError):
        mapping.close()


def write_tensors(buffer: SharedBuffer, arrays: Mapping[str, np.ndarray]) -> tuple[TensorRef, ...]:
    """Copy ``arrays`` into ``buffer`` (growing it if needed) and say where each one lies.

    Object arrays must hold only bytes or str (str is encoded as UTF-8).
    """
    plan: list[tuple[TensorRef, np.ndarray, bytes | None]] = []
    end = 0
    for name, array in arrays.items():
        blob = encode_bytes(array) if array.dtype.hasobject else None
        nbytes = len(blob) if blob is not None else array.nbytes
        dtype = None if blob is not None else _token(array.dtype)
        plan.append((TensorRef(name, dtype, array.shape, end, nbytes), array, blob))
        end += -(-nbytes // _ALIGN) * _ALIGN
    buffer.reserve(end)
    mapping = buffer.map
    assert mapping is not None
    for ref, array, blob in plan:
        if blob is not None:
            mapping[ref.offset : ref.offset + ref.nbytes] = blob
        elif ref.nbytes:
            np.ndarray(ref.shape, array.dtype, buffer=mapping, offset=ref.offset)[...] = array
    return tuple(ref for ref, _, _ in plan)


def read_tensors(
    mapping: mmap.mmap | None, refs: tuple[TensorRef, ...], *, copy: bool
) -> dict[str, np.ndarray]:
    """The tensors ``refs`` describe: views of ``mapping``, or copies when ``copy`` is true."""
    arrays: dict[str, np.ndarray] = {}
    for ref in refs:
        if ref.dtype is None:
            assert mapping is not None
            view = memoryview(mapping)[ref.offset : ref.offset + ref.nbytes]
            try:
                arrays[ref.name] = decode_bytes(view, ref.shape)
            finally:
                view.release()
        elif ref.nbytes == 0:
            arrays[ref.name] = np.empty(ref.shape, _dtype(ref.dtype))
        else:
            array = np.ndarray(ref.shape, _dtype(ref.dtype), buffer=mapping, offset=ref.offset)
            arrays[ref.name] = array.copy() if copy else array
    return arrays


_TOKENS: dict[np.dtype, str | np.dtype] = {}
_DTYPES: dict[str | np.dtype, np.dtype] = {}


def _token(dtype: np.dtype) -> str | np.dtype:
    """What a message carries for ``dtype``: its short string when that names it exactly."""
    token = _TOKENS.get(dtype)
    if token is None:
        token = dtype.str if dtype.isbuiltin and np.dtype(dtype.str) == dtype else dtype
        _TOKENS[dtype] = token
    return token


def _dtype(token: str | np.dtype) -> np.dtype:
    dtype = _DTYPES.get(token)
    if dtype is None:
        dtype = _DTYPES[token] = np.dtype(token)
    return dtype


def encode_bytes(array: np.ndarray) -> bytes:
    """Length-prefixed elements; raises TypeError for an element that is not bytes or str."""
    parts: list[bytes] = []
    for value in array.flat:
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif not isinstance(value, bytes):
            raise TypeError(f"a {type(value).__name__} element; expected bytes or str")
        parts.append(_LENGTH.pack(len(value)))
        parts.append(value)
    return b"".join(parts)


def decode_bytes(data: memoryview, shape: tuple[int, ...]) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    raw = bytes(data)  # one copy; slicing bytes then yields each element without another
    unpack = _LENGTH.unpack_from
    items = []
    position = 0
    for _ in range(count):
        (length,) = unpack(raw, position)
        position += _LENGTH.size
        items.append(raw[position : position + length])
        position += length
    out = np.empty(count, dtype=object)
    out[:] = items
    return out.reshape(shape)
