"""conveyor.Client's automatic path: large inputs to a server on this machine go through a
region the client made, registered once and reused, and so do large outputs once their size
is known; closed, it leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conveyor.client import Client
from conveyor.testing import RunningServer, run_server


@pytest.fixture(params=["http", "grpc"])
def url(request: pytest.FixtureRequest, shm_server: RunningServer) -> str:
    return shm_server.http_url if request.param == "http" else shm_server.grpc_url


def conveyor_regions(http: Any) -> set[str]:
    """The regions this test process's clients registered (tritonclient's view)."""
    mine = f"conveyor_{os.getpid()}_"
    return {r["name"] for r in http.get_system_shared_memory_status() if r["name"].startswith(mine)}


def test_large_inputs_go_through_one_reused_region(url: str, http: Any) -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    with Client(url, shared_memory_threshold=64) as client:
        for step in range(3):
            outputs = client.submit("tiny", {"INPUT0": x + step}).result(timeout=30)
            assert outputs["OUTPUT0"].tolist() == (x + step + 1).tolist()
        assert client.shared_memory is not None
        (region,) = client.shared_memory.regions  # one region, reused by every request
        assert conveyor_regions(http) == {region.name}
        assert Path(f"/dev/shm/{region.name}").exists()
        # BYTES (encoded anyway) and small inputs stay on the wire, in the same client.
        words = np.array([[b"a", b"bc"]], dtype=object)
        assert client.submit("echo_BYTES", {"INPUT0": words}).result(30)["OUTPUT0"].tolist() == [
            [b"a", b"bc"]
        ]
    assert conveyor_regions(http) == set()  # unregistered on close
    assert not Path(f"/dev/shm/{region.name}").exists()  # and unlinked


def test_shared_memory_false_keeps_everything_on_the_wire(url: str, http: Any) -> None:
    x = np.zeros((1, 16), np.float32)
    with Client(url, shared_memory=False, shared_memory_threshold=1) as client:
        assert client.submit("tiny", {"INPUT0": x}).result(timeout=30)["OUTPUT0"].sum() == 16
        assert client.shared_memory is None
        assert conveyor_regions(http) == set()


def test_a_server_without_the_extension_gets_the_wire(shm_repo: Path) -> None:
    x = np.zeros((1, 16), np.float32)
    with run_server(shm_repo, extra_args=["--shared-memory", "off"]) as server:
        for url in (server.http_url, server.grpc_url):
            with Client(url, shared_memory_threshold=1) as client:
                assert client.submit("tiny", {"INPUT0": x}).result(30)["OUTPUT0"].sum() == 16
                assert client.shared_memory is None


def region_bytes(name: str) -> bytes:
    return Path(f"/dev/shm/{name}").read_bytes()


def test_large_outputs_come_back_through_the_region_once_their_size_is_known(url: str) -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    with Client(url, shared_memory_threshold=64) as client:
        first = client.submit("tiny", {"INPUT0": x}).result(timeout=30)["OUTPUT0"]
        assert first.tolist() == (x + 1).tolist()  # on the wire: its size was not known
        assert client.shared_memory is not None
        (region,) = client.shared_memory.regions
        assert np.frombuffer(region_bytes(region.name), np.float32, 16, 64).sum() == 0
        for step in (10, 20):
            outputs = client.submit("tiny", {"INPUT0": x + step}).result(timeout=30)
            assert outputs["OUTPUT0"].tolist() == (x + step + 1).tolist()
            # The server wrote the output into the region, after the input (64 bytes in).
            written = np.frombuffer(region_bytes(region.name), np.float32, 16, 64)
            assert written.tolist() == (x + step + 1).reshape(-1).tolist()
            assert outputs["OUTPUT0"].base is None or outputs["OUTPUT0"].flags.owndata
        assert client.shared_memory.regions == [region]  # still the one region


def runs_of(http: Any, model: str) -> int:
    return int(http.get_inference_statistics(model)["model_stats"][0]["inference_count"])


def test_an_output_that_outgrows_its_slot_is_asked_for_again_on_the_wire(
    url: str, http: Any
) -> None:
    before = runs_of(http, "rows")
    with Client(url, shared_memory_threshold=64) as client:
        # Same input shape every time; the output's size follows the value. The second 2
        # and the second 5 come back through the region; the first 5 did not fit the slot
        # the 2 left (the server refused to write it), so it ran again on the wire; 1 fits.
        for count in (2, 2, 5, 5, 1):
            answer = client.submit("rows", {"COUNT": np.array([count], np.int32)}).result(30)
            assert answer["ROWS"].shape == (count, 16)
            assert (answer["ROWS"] == count).all()
    assert runs_of(http, "rows") - before == 6
