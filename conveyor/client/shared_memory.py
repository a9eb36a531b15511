"""The client's side of system shared memory: large inputs go through /dev/shm, not the socket.

When the server runs on this machine (the URL is a loopback address) and lists the
``system_shared_memory`` extension, a client copies each input of at least
``threshold`` bytes into a POSIX shared-memory region it created and registered with the
server, and sends only where it is. The server reads it in place (no copy on its side, no
bytes through the network stack).

Regions are made on first need and reused: a request takes a free region big enough
(or makes one, a power of two of at least 1 MiB), and gives it back once answered, so
concurrent requests never share one. The client unregisters and unlinks them all on close.
Outputs still come back on the wire: their size is known only once the model has run.
BYTES inputs, which need encoding anyway, stay on the wire too.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from multiprocessing import shared_memory
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from conveyor.protocol import binary
from conveyor.protocol.datatypes import datatype_of
from conveyor.protocol.shared_memory import InputInRegion, Location, is_loopback

DEFAULT_THRESHOLD = 64 * 1024  # bytes; below this the socket is as fast as a copy
MIN_REGION_BYTES = 1 << 20
ALIGNMENT = 64  # each tensor starts on a cache line

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

    def destroy(self) -> None:
        self._memory.close()
        self._memory.unlink()


class RegionPool:
    """Free regions, reused across requests; see the module docstring."""

    def __init__(self, threshold: int = DEFAULT_THRESHOLD) -> None:
        self.threshold = threshold
        self.regions: list[ClientRegion] = []
        self._free: list[ClientRegion] = []
        self._owner = id(self)

    def large_inputs(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The inputs worth sending through shared memory."""
        return {
            name: array
            for name, array in inputs.items()
            if isinstance(array, np.ndarray)
            and array.dtype != np.object_
            and array.nbytes >= self.threshold
        }

    def take(self, arrays: Mapping[str, np.ndarray]) -> ClientRegion | None:
        """A free region that holds ``arrays``, or None (then :meth:`make` one)."""
        needed = bytes_needed(arrays)
        for region in self._free:
            if region.byte_size >= needed:
                self._free.remove(region)
                return region
        return None

    def make(self, arrays: Mapping[str, np.ndarray]) -> ClientRegion:
        """A new region for ``arrays`` (the caller registers it, then gives it back)."""
        size = max(MIN_REGION_BYTES, 1 << (bytes_needed(arrays) - 1).bit_length())
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


def bytes_needed(arrays: Mapping[str, np.ndarray]) -> int:
    total = 0
    for array in arrays.values():
        total = _aligned(total + array.nbytes)
    return max(total, 1)


def _aligned(offset: int) -> int:
    return (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
