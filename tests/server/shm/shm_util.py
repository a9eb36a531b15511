"""Helpers of the shared-memory tests: Triton's ``simple`` model, and regions made with
tritonclient's own shared-memory utilities."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tritonclient.utils.shared_memory as shm

from conveyor.protocol.datatypes import DATATYPES
from conveyor.testing import RunningServer
from tests.models import RepoBuilder

SIMPLE_MODEL = """
class Model:
    def infer(self, inputs):
        a, b = inputs["INPUT0"], inputs["INPUT1"]
        return {"OUTPUT0": a + b, "OUTPUT1": a - b}
"""

SIMPLE_CONFIG = """
backend = "python"

[[inputs]]
name = "INPUT0"
datatype = "INT32"
shape = [1, 16]

[[inputs]]
name = "INPUT1"
datatype = "INT32"
shape = [1, 16]

[[outputs]]
name = "OUTPUT0"
datatype = "INT32"
shape = [1, 16]

[[outputs]]
name = "OUTPUT1"
datatype = "INT32"
shape = [1, 16]
"""

# An output whose size depends on an input's value, not its shape: COUNT rows of 16 floats.
ROWS_MODEL = """
import numpy as np

class Model:
    def infer(self, inputs):
        count = int(inputs["COUNT"].reshape(-1)[0])
        return {"ROWS": np.full((count, 16), float(count), np.float32)}
"""

ROWS_CONFIG = """
backend = "python"

[[inputs]]
name = "COUNT"
datatype = "INT32"
shape = [1]

[[outputs]]
name = "ROWS"
datatype = "FP32"
shape = [-1, 16]
"""

_serial = itertools.count()


def shm_repository(root: Path) -> Path:
    builder = RepoBuilder(root)
    for datatype in DATATYPES:
        builder.echo_model(f"echo_{datatype}", datatype)
    builder.tiny("tiny")
    builder.sleep_model("gate", instances=1)
    builder.python("simple", SIMPLE_MODEL, SIMPLE_CONFIG)
    builder.python("rows", ROWS_MODEL, ROWS_CONFIG)
    return root


def unique(prefix: str) -> str:
    """A name no other test (or engineer sharing this machine) uses."""
    return f"{prefix}_{os.getpid()}_{next(_serial)}"


@contextlib.contextmanager
def region(byte_size: int, prefix: str = "conveyor_test") -> Iterator[tuple[str, str, Any]]:
    """(region name, key, handle) of a fresh /dev/shm object made by tritonclient."""
    name = unique(prefix)
    key = f"/{name}"
    handle = shm.create_shared_memory_region(name, key, byte_size)
    try:
        yield name, key, handle
    finally:
        with contextlib.suppress(FileNotFoundError):
            shm.destroy_shared_memory_region(handle)


def server_maps(server: RunningServer) -> str:
    """The server process's memory map (to look for a region's /dev/shm object)."""
    return Path(f"/proc/{server.process.pid}/maps").read_text()


def server_fds(server: RunningServer) -> list[str]:
    """Where each of the server's open descriptors points."""
    fd_dir = Path(f"/proc/{server.process.pid}/fd")
    targets = []
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            targets.append(os.readlink(fd))
    return targets


def wait_unmapped(server: RunningServer, *keys: str, timeout_s: float = 10.0) -> None:
    """Until no descriptor or mapping of the server points at these keys' objects.

    A request's views of a region die just after it is answered, so an unregistered
    region is unmapped then, not necessarily by the time unregister answers.
    """
    paths = [f"/dev/shm{key}" for key in keys]
    for _ in range(int(timeout_s / 0.01)):
        maps, fds = server_maps(server), server_fds(server)
        if not any(path in maps or path in fds for path in paths):
            return
        time.sleep(0.01)
    raise AssertionError(f"{paths} still mapped or open in the server after {timeout_s} s")
