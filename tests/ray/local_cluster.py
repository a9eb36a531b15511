"""Starting a local Ray cluster for the tests, and cleaning up when Ray fails to start.

On a busy 2-core machine Ray's raylet now and then never registers with its GCS, and
`ray.init` gives up after a wait it hard-codes (30 s) with "The current node timed out
during startup". The processes the node had started (GCS, monitor, log monitor) are then
owned by nobody: `ray.shutdown()` cannot see them, because the failed node was never
recorded. They keep running, and their `Popen` objects warn "subprocess ... is still
running" in whichever later test the garbage collector happens to run. So a failed start
is cleaned up here, through the node object the failure left in its traceback, and tried
once more.
"""

from __future__ import annotations

import contextlib
import os
from types import TracebackType
from typing import Any

import psutil
import ray
from ray._private.node import Node

ATTEMPTS = 2


def start_local_ray(**options: Any) -> None:
    """`ray.init(address="local", **options)`, tried again once if the node fails to start."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            ray.init(address="local", **options)
            return
        except Exception as failure:
            ray.shutdown()
            stop_failed_node(failure.__traceback__)
            if attempt == ATTEMPTS:
                raise


def stop_failed_node(traceback: TracebackType | None) -> None:
    """Stop and reap what a node that failed in its constructor had started."""
    for node in _nodes_in(traceback):
        # Kills each process it recorded and waits for it, so the Popen objects are done.
        node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
    _stop_ray_descendants()


def _nodes_in(traceback: TracebackType | None) -> list[Node]:
    nodes: list[Node] = []
    while traceback is not None:
        candidate = traceback.tb_frame.f_locals.get("self")
        if isinstance(candidate, Node) and candidate not in nodes:
            nodes.append(candidate)
        traceback = traceback.tb_next
    return nodes


def _stop_ray_descendants(timeout: float = 10.0) -> None:
    """Anything running Ray's programs that the node had not recorded yet."""
    ray_package = os.path.dirname(ray.__file__)
    left = [p for p in psutil.Process().children(recursive=True) if _runs_ray(p, ray_package)]
    for process in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(left, timeout=timeout)


def _runs_ray(process: psutil.Process, ray_package: str) -> bool:
    try:
        return any(part.startswith(ray_package) for part in process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
