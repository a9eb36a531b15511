"""The region registry itself, in-process over real files: reference counts, unmapping,
shutdown, and the settings that turn the extension on or off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conveyor.errors import InvalidInput
from conveyor.protocol.shared_memory import InputInRegion, Location
from conveyor.server.settings import Settings
from conveyor.server.shared_memory import SharedMemoryRegistry, read_input, write_output


def mapped(path: Path) -> bool:
    return str(path) in Path("/proc/self/maps").read_text()


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    for name in ("one", "two"):
        (tmp_path / name).write_bytes(np.arange(16, dtype=np.float32).tobytes())
    return tmp_path


def test_unregister_waits_for_requests_using_the_region(directory: Path) -> None:
    registry = SharedMemoryRegistry(str(directory))
    registry.register("r", "/one", 0, 64)
    lease = registry.lease({"r"}, "infer")
    view = read_input(lease, "INPUT0", InputInRegion(Location("r", 64), "FP32", (16,)))
    assert not view.flags.writeable  # the model cannot write into the client's region
    registry.unregister("r")
    with pytest.raises(InvalidInput, match="not registered"):
        registry.status("r")
    registry.register("r", "/two", 0, 64)  # the name is free at once
    assert view.tolist() == list(range(16))  # the old mapping is still there for its request
    assert mapped(directory / "one")
    del view
    lease.release()
    assert not mapped(directory / "one")
    registry.close()
    assert not mapped(directory / "two")
    assert registry.open_mappings() == 0


def test_close_at_shutdown_unmaps_every_region(directory: Path) -> None:
    registry = SharedMemoryRegistry(str(directory))
    registry.register("a", "one", 0, 64)
    registry.register("b", "/two", 8, 32)
    lease = registry.lease({"b"}, "infer")
    write_output(lease, "OUTPUT0", np.full(8, 7, np.float32), Location("b", 32))
    registry.close()
    assert not mapped(directory / "one")
    assert mapped(directory / "two")  # still in use by a request
    lease.release()
    assert not mapped(directory / "two")
    written = np.frombuffer((directory / "two").read_bytes(), np.float32)
    assert written[2:10].tolist() == [7.0] * 8  # at the region's offset, 8 bytes in


def test_a_view_outliving_its_request_is_unmapped_when_it_goes(directory: Path) -> None:
    registry = SharedMemoryRegistry(str(directory))
    registry.register("r", "/one", 0, 64)
    lease = registry.lease({"r"}, "infer")
    echoed = read_input(lease, "INPUT0", InputInRegion(Location("r", 64), "FP32", (16,)))
    lease.release()
    registry.unregister("r")
    assert registry.open_mappings() == 1  # an answer still reads it
    del echoed
    assert registry.open_mappings() == 0
    assert not mapped(directory / "one")


def test_shared_memory_is_on_for_loopback_only_unless_told() -> None:
    assert Settings(host="127.0.0.1").shared_memory_off() is None
    assert Settings(host="::1").shared_memory_off() is None
    assert Settings(host="localhost").shared_memory_off() is None
    reason = Settings(host="0.0.0.0").shared_memory_off()
    assert reason is not None and "--shared-memory system" in reason
    assert Settings(host="0.0.0.0", shared_memory="system").shared_memory_off() is None  # type: ignore[arg-type]
    off = Settings(shared_memory="off").shared_memory_off()  # type: ignore[arg-type]
    assert off is not None and "--shared-memory off" in off
    with pytest.raises(ValueError, match="shared_memory must be one of"):
        Settings(shared_memory="cuda")  # type: ignore[arg-type]
