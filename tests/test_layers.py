"""The layer graph of docs/architecture.md, enforced by import-linter's contracts in
pyproject.toml ([tool.importlinter]): a module imports only from its own layer and below."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_layer_contract_is_kept() -> None:
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 kept, 0 broken" in out.stdout


def test_an_import_up_the_layers_breaks_the_contract(tmp_path: Path) -> None:
    # A copy of the package whose protocol layer imports the server: the check must fail
    # and name the import, or the contracts above prove nothing.
    shutil.copytree(
        ROOT / "conveyor", tmp_path / "conveyor", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "conveyor" / "protocol" / "datatypes.py").open("a") as file:
        file.write("\nfrom conveyor.server import settings  # noqa: E402, F401\n")
    out = lint_imports(tmp_path)
    assert out.returncode != 0
    assert "conveyor.protocol is not allowed to import conveyor.server" in out.stdout
