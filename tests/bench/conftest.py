"""``conveyor bench`` in a child process, for runs that spawn processes of their own.

Spawned workers (and the canned servers of ``ceiling``) bring multiprocessing's resource
tracker, a helper process that would otherwise live on inside the pytest process until it
exits, where other tests count their children.
"""

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "conveyor", "bench", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def bench_cli() -> Callable[..., subprocess.CompletedProcess]:
    return _run
