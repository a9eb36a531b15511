"""Keep large freed buffers in the process's heap instead of handing them back to the kernel.

glibc's malloc serves a large request (a 4 MiB tensor, a request body) with a fresh ``mmap``
and returns it with ``munmap`` once freed, so every large tensor costs a page fault per 4 KiB
page when it is first written. A server allocates and frees such buffers on every request:
measured on a 4 MiB identity at concurrency 4, one core, the server answered 200 requests a
second over HTTP with glibc's defaults and 371 with the settings below (the buffers are then
reused from the heap, already mapped). The price would be memory: what a burst of large
requests (or a client holding large answers unread) freed would stay mapped. So every
``TRIM_EVERY_S`` the serving process hands what is free back to the kernel
(``malloc_trim``, off the event loop): a busy server reuses its buffers between trims, and
an idle one returns to its size within seconds of a burst.

Applied once at start by ``conveyor serve`` and its front-end processes; a no-op off glibc,
and skipped when the environment already sets glibc's own tunables or
``CONVEYOR_MALLOC_TUNING=0``.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable

log = logging.getLogger("conveyor.server")

# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Buffers up to this size come from the heap (and are reused); larger ones still get mmap.
MMAP_THRESHOLD = 64 * 1024 * 1024
# Free memory at the top of the heap is returned to the kernel only past this much.
TRIM_THRESHOLD = 256 * 1024 * 1024
_GLIBC_TUNABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
# How often free heap memory is handed back: a page fault per 4 KiB once every few seconds
# costs nothing beside one per request.
TRIM_EVERY_S = 2.0
# glibc's malloc_trim, once tune_malloc applied the thresholds (None: not tuned, not trimmed).
_malloc_trim: Callable[[int], int] | None = None


def tune_malloc() -> bool:
    """Apply the thresholds above; True when they were applied."""
    if os.environ.get("CONVEYOR_MALLOC_TUNING", "1") == "0":
        return False
    if any(name in os.environ for name in _GLIBC_TUNABLES):
        return False  # the operator chose glibc's settings
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt thresholds)
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if applied:
        log.debug("malloc: buffers up to %d bytes reused from the heap", MMAP_THRESHOLD)
        global _malloc_trim
        trim = libc.malloc_trim
        trim.argtypes = (ctypes.c_size_t,)
        trim.restype = ctypes.c_int
        _malloc_trim = trim
    return applied


async def trim_periodically(every: float = TRIM_EVERY_S) -> None:
    """Until cancelled: every ``every`` seconds, hand the heap's free memory back to the
    kernel, on a thread (a trim of a large heap takes milliseconds). Returns at once when
    :func:`tune_malloc` did not apply (glibc then trims by its own thresholds)."""
    trim = _malloc_trim
    if trim is None:
        return
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(every)
        await loop.run_in_executor(None, trim, 0)
