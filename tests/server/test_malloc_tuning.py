"""The server's malloc thresholds: applied on glibc, skipped when the operator says so."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

PROBE = "from conveyor.server.malloc_tuning import tune_malloc; print(tune_malloc())"


def applied(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")
def test_applied_on_glibc_unless_turned_off() -> None:
    assert applied() == "True"
    assert applied(CONVEYOR_MALLOC_TUNING="0") == "False"
    # The operator's own glibc tunables win.
    assert applied(MALLOC_MMAP_THRESHOLD_="131072") == "False"
