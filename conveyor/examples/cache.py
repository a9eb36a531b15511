"""Where the built-in examples keep what they build or install: one per-user cache folder."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/conveyor``, or ``~/.cache/conveyor``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "conveyor"
