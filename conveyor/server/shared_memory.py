"""System shared-memory regions registered by clients: Triton's extension, protocol-neutral.

A client creates a POSIX shared-memory object (``/dev/shm/<key>``), registers it under a
name, and then points inputs and outputs at byte ranges of it instead of sending them. The
:class:`SharedMemoryRegistry` (owned by the data plane) maps each registered object once
and hands out views of it; nothing here knows HTTP or gRPC.

Why it is careful:

- The key is a plain name under ``/dev/shm``, opened ``O_NOFOLLOW`` and checked to be a
  regular file: a client cannot make the server map a symlink, a directory or a FIFO, or
  any file elsewhere. Nothing is ever created there.
- The object must belong to the server's own user, or to a user or group the operator
  named (:class:`Owners`): the server often runs as root, and without this check any
  local client could register another user's private (``0600``) object and read it back
  through an output, or write into it. Ownership is checked on the opened descriptor, so
  the file cannot be swapped between the check and the mapping.
- The client still owns the object and may shrink it after registering. Touching a page
  of a mapping past the end of its file kills the process with SIGBUS, so every use
  ``fstat``-s the descriptor first and refuses a range the object no longer holds. (A
  client that shrinks the object while a model is reading the input could still cause a
  fault; that is the client breaking its own contract mid-request, and Triton has the
  same exposure.)
- A region in use by requests is unmapped only when the last of them is done (a
  reference count): unregistering removes the name at once, the mapping goes later.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import stat
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from conveyor.errors import InvalidInput
from conveyor.protocol import binary
from conveyor.protocol import triton_words as triton
from conveyor.protocol.datatypes import datatype_of
from conveyor.protocol.grpc.converters import raw_tensor
from conveyor.protocol.shared_memory import InputInRegion, Location, output_too_large

SHM_DIRECTORY = "/dev/shm"
MAX_NAME_LENGTH = 255
# Each region holds a mapping: a bound, so a client cannot exhaust the server's map count.
MAX_REGIONS = 1024
# How soon, and at most how rarely, an unregistered region still mapped is retried.
MIN_SWEEP_DELAY_S = 0.01
MAX_SWEEP_DELAY_S = 1.0


@dataclasses.dataclass(frozen=True)
class Owners:
    """Whose shared-memory objects may be registered: the server's own user always, plus
    the users and groups (numeric ids) the operator named."""

    uids: frozenset[int] = frozenset()
    gids: frozenset[int] = frozenset()

    @classmethod
    def of(cls, uids: Iterable[int] = (), gids: Iterable[int] = ()) -> Owners:
        return cls(frozenset(uids) | {os.geteuid()}, frozenset(gids))

    def admits(self, info: os.stat_result) -> bool:
        return info.st_uid in self.uids or info.st_gid in self.gids

    def refusal(self, key: str, info: os.stat_result) -> str:
        """Why an object owned by someone else is refused: its owner, and who may own it."""
        allowed = [f"user {_user_name(uid)}" for uid in sorted(self.uids)]
        allowed += [f"group {_group_name(gid)}" for gid in sorted(self.gids)]
        return triton.first(
            triton.region_cannot_open(key),
            f"shared memory key {key!r} belongs to user {_user_name(info.st_uid)} and group "
            f"{_group_name(info.st_gid)}; this server registers only objects owned by "
            f"{' or '.join(allowed)} (the operator may admit another owner with "
            "--shared-memory-user or --shared-memory-group)",
        )


def _user_name(uid: int) -> str:
    """'name (uid N)', or 'uid N' for a user with no passwd entry."""
    import pwd  # POSIX only: imported where used, as is all of /dev/shm

    try:
        return f"{pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group_name(gid: int) -> str:
    import grp

    try:
        return f"{grp.getgrgid(gid).gr_name!r} (gid {gid})"
    except KeyError:
        return f"gid {gid}"


class Region:
    """One registered region: an open descriptor and a mapping of its first bytes."""

    def __init__(
        self,
        name: str,
        key: str,
        offset: int,
        byte_size: int,
        directory: str,
        owners: Owners | None = None,
    ) -> None:
        self.name = name
        self.key = key
        self.offset = offset
        self.byte_size = byte_size
        self._users = 0
        self._unregistered = False
        self._lock = threading.Lock()
        path = os.path.join(directory, plain_key(key))
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            raise InvalidInput(
                triton.first(
                    triton.region_cannot_open(key),
                    f"shared memory key {key!r}: no such object in {directory}; create it "
                    "(shm_open) before registering it",
                )
            ) from None
        except OSError as exc:
            raise InvalidInput(
                f"shared memory key {key!r} cannot be opened ({exc.strerror}); it must be a "
                f"regular shared-memory object in {directory}, not a link, directory or FIFO"
            ) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InvalidInput(
                    f"shared memory key {key!r} is not a regular shared-memory object"
                )
            owners = owners or Owners.of()
            if not owners.admits(info):
                raise InvalidInput(owners.refusal(key, info))
            end = offset + byte_size
            if info.st_size < end:
                raise InvalidInput(
                    triton.first(
                        triton.region_too_small(name),
                        f"shared memory region {name!r}: offset {offset} + byte_size "
                        f"{byte_size} = {end} bytes, but the object {key!r} holds "
                        f"{info.st_size}",
                    )
                )
            # Mapped from 0 (mmap offsets must be page-aligned); the region's offset is
            # applied to every view. The mapping keeps its own duplicate of the descriptor,
            # which ``size()`` fstat-s; ours is closed at once.
            self._map: mmap.mmap | None = mmap.mmap(fd, end) if end else None
        finally:
            os.close(fd)

    def status(self) -> dict[str, Any]:
        """Triton's status entry for a region."""
        return {
            "name": self.name,
            "key": self.key,
            "offset": self.offset,
            "byte_size": self.byte_size,
        }

    # -- use by requests (reference counted) ------------------------------------------------

    def acquire(self) -> None:
        with self._lock:
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            close = self._unregistered and self._users == 0
        if close:
            self.close()

    def unregister(self) -> None:
        """No new users; the mapping closes once the current ones are done."""
        with self._lock:
            self._unregistered = True
            close = self._users == 0
        if close:
            self.close()

    def close(self) -> bool:
        """Unmap (and close the mapping's descriptor); False while a view still exists.

        A numpy view outliving its request (an output that echoes an input, still being
        answered) keeps the mapping: the registry tries again later, and the mapping goes
        with the last view in any case.
        """
        mapping = self._map
        if mapping is None:
            return True
        try:
            mapping.close()
        except BufferError:
            return False
        self._map = None
        return True

    def close_if_idle(self) -> bool:
        """True once unmapped: closes it now if no request uses it any more."""
        with self._lock:
            idle = self._users == 0
        return self.close() if idle else False

    # -- views ------------------------------------------------------------------------------

    def view(self, located: Location, where: str) -> memoryview:
        """The bytes of ``located`` in this region, after checking they are still there."""
        start = located.offset
        end = start + located.byte_size
        if end > self.byte_size:
            words = triton.region_offset if start >= self.byte_size else triton.region_range
            raise InvalidInput(
                triton.first(
                    words(self.name),
                    f"{where}: shared memory region {self.name!r} is {self.byte_size} bytes; "
                    f"offset {start} + byte_size {located.byte_size} = {end} runs past its end",
                )
            )
        mapping = self._map
        if mapping is None:
            if not self.byte_size:
                return memoryview(b"")
            raise InvalidInput(f"{where}: shared memory region {self.name!r} is unregistered")
        # The client owns the object and may have shrunk it since: touching a page past
        # its end would kill the server (SIGBUS), so check now (size() fstat-s it).
        size = mapping.size()
        if size < self.offset + end:
            raise InvalidInput(
                f"{where}: shared memory region {self.name!r} (key {self.key!r}) now holds "
                f"{max(0, size - self.offset)} bytes, fewer than offset {start} + byte_size "
                f"{located.byte_size}; was it truncated after it was registered?"
            )
        return memoryview(mapping)[self.offset + start : self.offset + end]


@dataclasses.dataclass
class Lease:
    """The regions one request uses, held until it is answered (see ``release``)."""

    regions: dict[str, Region] = dataclasses.field(default_factory=dict)

    def release(self) -> None:
        regions, self.regions = self.regions, {}
        for region in regions.values():
            region.release()


class SharedMemoryRegistry:
    """Region name -> :class:`Region`; safe to use from the loop and engine threads."""

    def __init__(self, directory: str = SHM_DIRECTORY, owners: Owners | None = None) -> None:
        self._directory = directory
        self._owners = owners or Owners.of()
        self._regions: dict[str, Region] = {}
        # Unregistered regions still mapped (a request uses them, or a view of them is
        # still alive): a timer retries until each is unmapped (see _sweep).
        self._closing: list[Region] = []
        self._lock = threading.Lock()
        self._reaper: threading.Timer | None = None

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        check_name(name, "region name")
        for field, value in (("offset", offset), ("byte_size", byte_size)):
            if type(value) is not int or value < 0:
                raise InvalidInput(f"register {name!r}: {field!r} must be an integer >= 0")
        if not isinstance(key, str):
            raise InvalidInput(f"register {name!r}: 'key' must be a string")
        with self._lock:
            if name in self._regions:
                raise InvalidInput(
                    triton.first(
                        triton.region_registered(name),
                        f"shared memory region {name!r} is already registered; unregister "
                        "it first or pick another name",
                    )
                )
            if len(self._regions) >= MAX_REGIONS:
                raise InvalidInput(
                    f"register {name!r}: {MAX_REGIONS} shared memory regions are registered "
                    "already, the most this server holds; unregister some first"
                )
            # Opening and mapping is a few system calls, under the lock so that two
            # registrations of one name cannot both succeed.
            self._regions[name] = Region(
                name, key, offset, byte_size, self._directory, self._owners
            )

    def unregister(self, name: str | None) -> None:
        """Unregister ``name`` (None: every region). An unknown name is not an error, as
        Triton answers it."""
        with self._lock:
            if name is None:
                gone = list(self._regions.values())
                self._regions.clear()
            else:
                region = self._regions.pop(name, None)
                gone = [] if region is None else [region]
        for region in gone:
            region.unregister()
        with self._lock:
            self._closing.extend(gone)
        self._sweep()

    def status(self, name: str | None) -> list[dict[str, Any]]:
        with self._lock:
            if name is None:
                return [region.status() for region in self._regions.values()]
            region = self._regions.get(name)
        if region is None:
            raise InvalidInput(
                triton.first(
                    triton.system_region_not_found(name),
                    f"shared memory region {name!r} is not registered",
                )
            )
        return [region.status()]

    def close(self) -> None:
        """At shutdown: every region unregistered (mappings close as requests finish)."""
        self.unregister(None)

    def open_mappings(self) -> int:
        """Regions still mapped: registered ones, and unregistered ones still in use."""
        self._sweep()
        with self._lock:
            return len(self._regions) + len(self._closing)

    def _sweep(self, delay: float = MIN_SWEEP_DELAY_S) -> None:
        """Unmap every unregistered region nothing uses any more; retry the rest later.

        A request's views of a region die a little after it is answered (the engine
        thread, the response being written), so an unregistered region in use is usually
        unmapped by the first retry; one a model keeps a view of is retried ever less often.
        """
        with self._lock:
            self._closing = [region for region in self._closing if not region.close_if_idle()]
            if not self._closing or self._reaper is not None:
                return
            reaper = threading.Timer(delay, self._reap, (min(delay * 2, MAX_SWEEP_DELAY_S),))
            reaper.daemon = True
            self._reaper = reaper
        reaper.start()

    def _reap(self, next_delay: float) -> None:
        with self._lock:
            self._reaper = None
        self._sweep(next_delay)

    # -- requests ---------------------------------------------------------------------------

    def lease(self, names: set[str], where: str) -> Lease:
        """Hold every region in ``names`` for one request; InvalidInput for an unknown one."""
        lease = Lease()
        with self._lock:
            for name in names:
                region = self._regions.get(name)
                if region is None:
                    lease.release()
                    raise InvalidInput(
                        triton.first(
                            triton.region_not_found(name),
                            f"{where}: shared memory region {name!r} is not registered; "
                            "register it first",
                        )
                    )
                region.acquire()
                lease.regions[name] = region
        return lease


def read_input(
    lease: Lease, name: str, tensor: InputInRegion, model: str | None = None
) -> np.ndarray:
    """Input ``name`` as a read-only numpy view of its region (BYTES: decoded); ``model``:
    the request's, for Triton's words when the byte size does not fit the shape."""
    located = tensor.location
    where = f"input {name!r}"
    view = lease.regions[located.region].view(located, where)
    names = None if model is None else (model, name)
    array = raw_tensor(
        view, tensor.datatype, tensor.shape, f"{where} (shared memory)", triton_names=names
    )
    if array.base is not None and array.flags.writeable:
        array.flags.writeable = False  # the model must not write into the client's region
    return array


def write_output(lease: Lease, name: str, array: np.ndarray, located: Location) -> None:
    """Output ``name`` written at ``located`` (BYTES: 4-byte length-prefixed elements)."""
    where = f"output {name!r}"
    datatype = datatype_of(array.dtype)
    chunk = binary.tensor_bytes(array, datatype)  # a view unless BYTES or not contiguous
    needed = len(chunk)
    if needed > located.byte_size:
        raise InvalidInput(
            output_too_large(where, located.byte_size, datatype, list(array.shape), needed)
        )
    view = lease.regions[located.region].view(located, where)
    target = np.frombuffer(view, np.uint8, needed)
    target[:] = np.frombuffer(chunk, np.uint8) if isinstance(chunk, bytes) else chunk


def output_destination(lease: Lease, name: str, located: Location) -> np.ndarray:
    """The bytes at ``located`` as a writable uint8 array, for the model to fill in place."""
    view = lease.regions[located.region].view(located, f"output {name!r}")
    return np.frombuffer(view, np.uint8) if located.byte_size else np.empty(0, np.uint8)


def already_written(array: np.ndarray, destination: np.ndarray) -> bool:
    """True when ``array`` is a contiguous view starting at ``destination`` and within it:
    the model computed it in place, and copying it there again would change nothing."""
    return (
        array.dtype != object
        and array.flags.c_contiguous
        and array.nbytes <= destination.nbytes
        and array.nbytes > 0
        and array.ctypes.data == destination.ctypes.data
    )


def check_name(name: str, what: str) -> None:
    """A plain name: 1-255 visible characters with no path separator."""
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= MAX_NAME_LENGTH
        or "/" in name
        or name in (".", "..")
        or not name.isprintable()
        or name != name.strip()
    ):
        raise InvalidInput(
            f"{what} {name!r} is not a plain name: expected 1-{MAX_NAME_LENGTH} printable "
            "characters, no '/', not '.' or '..'"
        )


def plain_key(key: str) -> str:
    """A shm key ('/name', as shm_open takes it) -> the object's file name under /dev/shm."""
    name = key[1:] if key.startswith("/") else key
    check_name(name, "shared memory key")
    return name
