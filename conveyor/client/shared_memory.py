"""The client's side of system shared memory: large inputs go through /dev/shm, not the socket.

When the server runs on this machine (the URL is a loopback address) and lists the
``system_shared_memory`` extension, a client copies each input of at least
``threshold`` bytes into a POSIX shared-memory region it created and registered with the
server, and sends only where it is. The server reads it in place (no copy on its side, no
bytes through the network stack).

Regions are made on first need and reused: a request takes a free region big enough
(or makes one, a power of two of at least 1 MiB), and gives it back once answered, so
concurrent requests never share one. The client unregisters and unlinks them all on close.

Outputs: their size is known only once the model has run, so the first request with given
input shapes gets its outputs on the wire, and the pool remembers their sizes. Later
requests to the same model with the same input shapes ask the server to write each large
output into the region, after the inputs, and the client copies it out before the region is
reused. If an output has grown meanwhile (a model whose output size depends on the input's
values), the server refuses to write it; the client forgets the sizes and sends the request
again on the wire, so that one request runs twice on the model. BYTES tensors, which need
encoding anyway, stay on the wire.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Hashable, Mapping, Sequence
from multiprocessing import shared_memory
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from conveyor.errors import InvalidInput
from conveyor.protocol import binary
from conveyor.protocol.datatypes import datatype_of, element_count, element_size
from conveyor.protocol.shared_memory import InputInRegion, Location, is_loopback

DEFAULT_THRESHOLD = 64 * 1024  # bytes; below this the socket is as fast as a copy
MIN_REGION_BYTES = 1 << 20
ALIGNMENT = 64  # each tensor starts on a cache line
MAX_KNOWN_SHAPES = 256  # (model, input shapes) whose output sizes a client remembers

_serial = itertools.count()


class ClientRegion:
    """One region this client created: the /dev/shm object and its registered name."""

    def __init__(self, byte_size: int, owner: int) -> None:
        self.name = f"conveyor_{os.getpid()}_{owner}_{next(_serial)}"
        self.key = f"/{self.name}"
        self._memory = shared_memory.SharedMemory(self.name, create=True, size=byte_size)
        self.byte_size = byte_size

    def place(self, arrays: Mapping[str, np.ndarray]) -> dict[str, InputInRegion]:
        """Copy ``arrays`` in, one after another; where each one is."""
        placed: dict[str, InputInRegion] = {}
        offset = 0
        for name, array in arrays.items():
            datatype = datatype_of(array.dtype)
            chunk = binary.tensor_bytes(array, datatype)
            size = len(chunk)
            buffer = self._memory.buf
            assert buffer is not None  # None only once closed
            target = np.frombuffer(buffer, np.uint8, size, offset)
            target[:] = chunk
            del target, buffer  # no view may outlive this call (close() refuses then)
            placed[name] = InputInRegion(
                Location(self.name, size, offset), datatype, tuple(array.shape)
            )
            offset = _aligned(offset + size)
        return placed

    def reserve(self, sizes: Mapping[str, int], start: int) -> dict[str, OutputSlot]:
        """Room for outputs of ``sizes`` bytes, one after another from ``start``."""
        slots: dict[str, OutputSlot] = {}
        offset = _aligned(start)
        for name, size in sizes.items():
            slots[name] = OutputSlot(self, Location(self.name, size, offset))
            offset = _aligned(offset + size)
        return slots

    def read(self, located: Location, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
        """A copy of the tensor the server wrote at ``located`` (the region is reused)."""
        buffer = self._memory.buf
        assert buffer is not None  # None only once closed
        size = _tensor_size(datatype, shape)
        if size is None or size > located.byte_size:
            raise InvalidInput(
                f"the server wrote {datatype} {list(shape)} into {located.byte_size} bytes of "
                f"shared memory; that does not fit"
            )
        view = binary.tensor(buffer, located.offset, size, datatype, shape, "output")
        copied = view.copy()
        del view, buffer  # no view may outlive this call (close() refuses then)
        return copied

    def destroy(self) -> None:
        self._memory.close()
        self._memory.unlink()


@dataclasses.dataclass(frozen=True)
class OutputSlot:
    """Where the server is to write one output, and how the client reads it back."""

    region: ClientRegion
    location: Location

    def read(self, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
        return self.region.read(self.location, datatype, shape)


@dataclasses.dataclass(frozen=True)
class KnownOutputs:
    """What one model answered for given input shapes: every output's name, in order, and
    the byte sizes of those large enough to come back through shared memory."""

    names: tuple[str, ...]
    large: dict[str, int]


class RegionPool:
    """Free regions, reused across requests; see the module docstring."""

    def __init__(self, threshold: int = DEFAULT_THRESHOLD) -> None:
        self.threshold = threshold
        self.regions: list[ClientRegion] = []
        self._free: list[ClientRegion] = []
        self._owner = id(self)
        self._known: dict[Hashable, KnownOutputs] = {}

    def known_outputs(self, key: Hashable) -> KnownOutputs | None:
        """The outputs last seen for ``key`` (see :func:`shape_key`), if any were large."""
        return self._known.get(key)

    def learn(self, key: Hashable, outputs: Mapping[str, Any]) -> None:
        """Remember the sizes of ``outputs``, the answer to a request with ``key``."""
        large = {
            name: array.nbytes
            for name, array in outputs.items()
            if isinstance(array, np.ndarray)
            and array.dtype != np.object_
            and array.nbytes >= self.threshold
        }
        if large:
            if len(self._known) >= MAX_KNOWN_SHAPES:
                self._known.pop(next(iter(self._known)))  # the oldest
            self._known[key] = KnownOutputs(tuple(outputs), large)
        else:
            self._known.pop(key, None)

    def forget_outputs(self, key: Hashable) -> None:
        self._known.pop(key, None)

    def large_inputs(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The inputs worth sending through shared memory."""
        return {
            name: array
            for name, array in inputs.items()
            if isinstance(array, np.ndarray)
            and array.dtype != np.object_
            and array.nbytes >= self.threshold
        }

    def take(self, needed: int) -> ClientRegion | None:
        """A free region of at least ``needed`` bytes, or None (then :meth:`make` one)."""
        for region in self._free:
            if region.byte_size >= needed:
                self._free.remove(region)
                return region
        return None

    def make(self, needed: int) -> ClientRegion:
        """A new region of at least ``needed`` bytes (the caller registers it, then gives
        it back)."""
        size = max(MIN_REGION_BYTES, 1 << (max(needed, 1) - 1).bit_length())
        region = ClientRegion(size, self._owner)
        self.regions.append(region)
        return region

    def give_back(self, region: ClientRegion) -> None:
        self._free.append(region)

    def forget(self, region: ClientRegion) -> None:
        """A region the server would not take: destroyed here, never offered again."""
        self.regions.remove(region)
        region.destroy()


def on_this_machine(url: str) -> bool:
    """Whether ``url``'s host is a loopback address (so the server shares our /dev/shm)."""
    return is_loopback(urlsplit(url).hostname or "")


def shape_key(
    model: str,
    version: int | str | None,
    outputs: Sequence[str] | None,
    inputs: Mapping[str, Any],
) -> Hashable:
    """What decides a model's output sizes, as far as the client can tell."""
    shapes = tuple(
        (name, np.asarray(array).dtype.str, np.shape(array)) for name, array in inputs.items()
    )
    return (model, version, None if outputs is None else tuple(outputs), shapes)


def bytes_needed(sizes: list[int]) -> int:
    """Bytes for tensors of ``sizes``, one after another, each aligned."""
    total = 0
    for size in sizes:
        total = _aligned(total + size)
    return total


def _tensor_size(datatype: str, shape: tuple[int, ...]) -> int | None:
    itemsize = element_size(datatype)  # None for BYTES, never written here by the client
    return None if itemsize is None else element_count(shape) * itemsize


def _aligned(offset: int) -> int:
    return (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
