"""Without Ray Serve installed: the CLI and the Python API say what to install, and the
rest of Conveyor neither needs nor imports Ray."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import conveyor

ROOT = Path(conveyor.__file__).resolve().parent.parent
# ``sys.modules['ray'] = None`` makes every ``import ray`` fail as if it were not installed.
HIDE_RAY = "import sys; sys.modules['ray'] = None; "
INSTALL = "pip install '.[ray]'"


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDE_RAY + code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_cli_names_the_extra_to_install(tmp_path: Path) -> None:
    for command in (["ray", "deploy", str(tmp_path)], ["ray", "status"]):
        done = run(f"from conveyor.cli import main; sys.exit(main({command!r}))")
        assert done.returncode == 2, done.stderr
        assert "needs ray[serve], which is not installed" in done.stderr
        assert INSTALL in done.stderr


def test_python_api_names_the_extra_to_install(tmp_path: Path) -> None:
    done = run(
        "import conveyor.ray\n"
        "try:\n"
        f"    conveyor.ray.build_app({str(tmp_path)!r})\n"
        "except conveyor.Unsupported as exc:\n"
        "    print(exc.message)\n"
    )
    assert done.returncode == 0, done.stderr
    assert INSTALL in done.stdout


def test_conveyor_and_its_cli_do_not_import_ray() -> None:
    code = "import sys, conveyor, conveyor.cli, conveyor.ray; print('ray' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.stdout.strip() == "False", done.stderr


def test_only_the_cli_imports_conveyor_ray() -> None:
    """conveyor.ray sits on top (beside the CLI): it imports the server and the engine,
    and nothing else in the package imports it."""
    found = []
    for path in sorted((ROOT / "conveyor").rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[:2] == ("conveyor", "ray") or relative == Path("conveyor/cli.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{relative}: {n}" for n in names if n.startswith("conveyor.ray")]
    assert found == []


def test_the_ray_api_is_pinned() -> None:
    import conveyor.ray

    assert sorted(conveyor.ray.__all__) == ["APP_NAME", "build_app", "require_ray_serve"]
    for name in conveyor.ray.__all__:
        assert hasattr(conveyor.ray, name)
