"""A front end that stops reading never stalls an engine thread: the reply it is owed
waits in the link's backlog, other requests (on the same model instance) are answered,
and once the front end reads again its reply arrives whole."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder
from tests.polling import wait_until
from tests.server.workers.workers_util import http_client, paused, wait_front_ends

pytestmark = pytest.mark.workers

# Sleeps INPUT0[0] seconds, then returns INPUT0[1] float32s (0, 1, 2, ...); logs "start"
# and "end" around it, so a test knows when the engine is about to write the reply.
BIG_MODEL = """
import time
import numpy as np

class Model:
    def infer(self, inputs):
        seconds, size = inputs["INPUT0"].ravel()
        with open(self.version_dir / "events.log", "a") as log:
            log.write("start\\n")
        time.sleep(float(seconds))
        output = np.arange(int(size), dtype=np.float32)
        with open(self.version_dir / "events.log", "a") as log:
            log.write("end\\n")
        return {"OUTPUT0": output}
"""

BIG_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [2]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [-1]
"""

BIG = 8 << 20  # float32s: 32 MiB, far more than a Unix socket's buffer


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    RepoBuilder(tmp_path).python("big", BIG_MODEL, BIG_CONFIG)
    return tmp_path


@pytest.fixture
def server(repository: Path) -> Iterator[RunningServer]:
    with run_server(repository, extra_args=["--workers", "2"]) as running:
        yield running


def big_request(client: Any, seconds: float, size: int) -> np.ndarray:
    tensor = httpclient.InferInput("INPUT0", [2], "FP32")
    tensor.set_data_from_numpy(np.array([seconds, size], np.float32))
    output = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
    result: np.ndarray = client.infer("big", [tensor], outputs=[output]).as_numpy("OUTPUT0")
    return result


def test_a_front_end_that_stops_reading_stalls_nobody_else(
    server: RunningServer, repository: Path
) -> None:
    events = repository / "big" / "1" / "events.log"
    stalled, other = wait_front_ends(server, 2)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with paused(other):  # its connection goes to ``stalled``
            owed = pool.submit(big_request, http_client(server), 1.0, BIG)
            wait_until(lambda: _connected(stalled, server), 20, "the connection accepted")
            wait_until(lambda: events.exists() and "start" in events.read_text(), 20, "running")
        with paused(stalled):  # reads nothing while the engine writes its 32 MiB reply
            wait_until(lambda: "end" in events.read_text(), 20, "the reply being written")
            # The one instance thread wrote what the socket took and moved on: the next
            # request (through the other front end) runs on it and is answered.
            quick = big_request(http_client(server), 0.0, 4)
            np.testing.assert_array_equal(quick, np.arange(4, dtype=np.float32))
            assert not owed.done()
        np.testing.assert_array_equal(owed.result(60), np.arange(BIG, dtype=np.float32))


def _connected(pid: int, server: RunningServer) -> bool:
    """Whether front end ``pid`` has accepted an HTTP connection."""
    return any(
        c.status == psutil.CONN_ESTABLISHED and c.laddr.port == server.http_port
        for c in psutil.Process(pid).net_connections(kind="tcp")
    )
