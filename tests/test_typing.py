"""The package ships py.typed, so its annotations are a promise: mypy must pass on it.

Runs mypy with the settings in pyproject.toml ([tool.mypy]: unused ``type: ignore``
comments are errors, untyped function bodies are checked).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mypy", reason="mypy is in the test extra")


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "conveyor"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_type_ignore_names_its_error_code() -> None:
    bare = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "conveyor").rglob("*.py")
        if "_generated" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"#\s*type:\s*ignore(?!\[)", line)
    ]
    assert not bare, f"type: ignore without an error code: {bare}"
