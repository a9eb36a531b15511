"""``python -m benchmarks.submit_path --quick`` runs end to end, both loads, every answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_run_measures_both_loads(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.submit_path", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "submit_path.json").read_text())
    (run,) = report["runs"]["this tree"]
    assert Path(run["tree"]) == ROOT
    assert run["closed16_failed"] == 0
    for figure in ("serial_wall_us", "serial_cpu_us", "closed16_wall_us", "closed16_cpu_us"):
        assert run[figure] > 0, figure
    assert "| this tree |" in (tmp_path / "submit_path.md").read_text()
