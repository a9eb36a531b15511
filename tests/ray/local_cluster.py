"""A Ray cluster started the way docs/ray.md tells users to: ``ray start --head``.

Only what keeps a test to itself is added: its own ports, temp dir and home directory
(Ray keeps its token in ``~/.ray/auth_token``), every address on loopback, and
``--block`` so the cluster is this one process, stopped by its own id. ``ray stop``
would end every Ray process on the machine, other people's included.

Token authentication is as Ray sets it: ``ray start --head`` turns it on when a token
exists on the machine, so one is made first with ``ray get-auth-token --generate`` (what
``ray.init()`` also does on a machine's first local cluster).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from conveyor.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 120.0  # a crowded 2-core machine can take a minute
STOP_TIMEOUT_S = 60.0


@dataclasses.dataclass(frozen=True)
class RayHead:
    address: str  # the GCS, host:port
    home: Path  # HOME of every process: its .ray/auth_token is the cluster's token
    env: dict[str, str]  # for commands that talk to the cluster (RAY_ADDRESS set)
    log: Path

    @property
    def token(self) -> str:
        return (self.home / ".ray" / "auth_token").read_text().strip()


def cluster_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "HOME": str(home),
        # Workers import conveyor (and the models' files) from this checkout.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        # Ray replaces a loopback --node-ip-address with the machine's address unless it
        # is told the cluster is one machine (its switch for single-node macOS/Windows).
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        # SIGTERM drains the node for 30 s first (for Kubernetes upgrades); not here.
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        **(extra or {}),
    }
    for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    return env


@contextlib.contextmanager
def ray_head(
    root: Path, num_cpus: int = 2, extra_env: dict[str, str] | None = None
) -> Iterator[RayHead]:
    """``ray start --head --block`` in the background, until the block ends."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = cluster_env(home, extra_env)
    subprocess.run(
        [RAY, "get-auth-token", "--generate"], env=env, check=True, capture_output=True,
        timeout=60,
    )  # fmt: skip
    port = free_port()
    log = root / "ray-start.log"
    # A short --temp-dir: Ray's socket paths must stay under the 107-byte limit.
    temp_dir = Path("/tmp") / f"ray-conveyor-{os.getpid()}-{port}"
    command = [
        RAY, "start", "--head", "--block", "--num-cpus", str(num_cpus),
        "--node-ip-address", "127.0.0.1", "--dashboard-host", "127.0.0.1",
        "--temp-dir", str(temp_dir), "--port", str(port),
        "--ray-client-server-port", str(free_port()),
        "--dashboard-port", str(free_port()),
        "--dashboard-agent-listen-port", str(free_port()),
        "--disable-usage-stats",
    ]  # fmt: skip
    with log.open("w") as out:
        head = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_started(head, log)
        address = f"127.0.0.1:{port}"
        yield RayHead(address, home, {**env, "RAY_ADDRESS": address}, log)
    finally:
        _stop(head)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_started(head: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if head.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ray start --head did not start:\n{log.read_text()[-4000:]}")
        time.sleep(0.5)


def _stop(head: subprocess.Popen[bytes]) -> None:
    """SIGTERM the ``ray start --block`` process (it stops what it started); whatever
    of its own processes outlives the wait is killed by id."""
    try:
        started = psutil.Process(head.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        head.kill()
        head.wait(timeout=10)
    _, alive = psutil.wait_procs(started, timeout=10)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=10)
