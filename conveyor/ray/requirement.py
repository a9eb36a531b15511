"""The one check that Ray Serve is installed, with what to install when it is not."""

from __future__ import annotations

import importlib.util

from conveyor.errors import Unsupported

INSTALL = "pip install '.[ray]' from a checkout of Conveyor"


def require_ray_serve() -> None:
    """Raise Unsupported, naming the extra to install, when ``ray.serve`` cannot load."""
    try:
        found = importlib.util.find_spec("ray.serve") is not None
    except ModuleNotFoundError:  # no ``ray`` package at all
        found = False
    if not found:
        raise Unsupported(
            f"Conveyor on Ray Serve needs ray[serve], which is not installed; {INSTALL}"
        )
