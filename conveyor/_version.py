"""The package's version, written once: ``version`` in pyproject.toml.

An installed package reads it from its metadata. A source checkout that was never installed
(the tests run with PYTHONPATH) reads the pyproject.toml beside the package instead.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

UNKNOWN = "0+unknown"


def package_version() -> str:
    from importlib import metadata  # ~30 ms to import: only when the version is asked for

    try:
        return metadata.version("conveyor")
    except metadata.PackageNotFoundError:
        return _checkout_version(Path(__file__).resolve().parent.parent / "pyproject.toml")


def _checkout_version(pyproject: Path) -> str:
    try:
        with open(pyproject, "rb") as f:
            project = tomllib.load(f).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return UNKNOWN
    version = project.get("version")
    if project.get("name") != "conveyor" or not isinstance(version, str):
        return UNKNOWN
    return version
