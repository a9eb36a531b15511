"""Helpers for servers started with ``--workers N``: find, pause and resume front ends.

A paused (SIGSTOPped) front-end process cannot accept, so every new HTTP connection goes to
the other one (they share one listening socket): that is how a test picks the front end
that serves its requests without any test-only hook in the server.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from typing import Any

import numpy as np
import psutil
import tritonclient.http as httpclient

from conveyor.testing import RunningServer
from tests.polling import wait_until

FRONT_END_MODULE = "conveyor.server.workers.process"


def front_end_pids(server: RunningServer) -> list[int]:
    """The server's front-end processes that are serving gRPC (so HTTP too)."""
    pids = []
    for child in psutil.Process(server.process.pid).children():
        with contextlib.suppress(psutil.Error):
            if FRONT_END_MODULE not in child.cmdline():
                continue
            listening = [
                c
                for c in child.net_connections(kind="tcp")
                if c.status == psutil.CONN_LISTEN and c.laddr.port == server.grpc_port
            ]
            if listening:
                pids.append(child.pid)
    return sorted(pids)


def wait_front_ends(server: RunningServer, count: int, timeout: float = 30.0) -> list[int]:
    wait_until(lambda: len(front_end_pids(server)) == count, timeout=timeout)
    return front_end_pids(server)


@contextlib.contextmanager
def paused(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def http_client(server: RunningServer) -> Any:
    """A new client (new connections), so the front end that accepts them is chosen now."""
    return httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))


def tiny_input(module: Any) -> Any:
    tensor = module.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.arange(16, dtype=np.float32).reshape(1, 16))
    return tensor


def success_count(client: Any, model: str) -> int:
    stats = client.get_inference_statistics(model)
    if isinstance(stats, dict):
        return int(stats["model_stats"][0]["inference_stats"]["success"]["count"])
    return int(stats.model_stats[0].inference_stats.success.count)
