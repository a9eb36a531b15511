"""``python -m benchmarks.openvino --short`` runs end to end: both backends get their speed
points (HTTP and in-process) and their memory figures, and eight executions in flight hold
the weights once, as one does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = {"onnxruntime", "openvino"}


@pytest.mark.slow
@pytest.mark.timeout(300)  # seven server starts: over a minute on a loaded machine
def test_the_short_run_measures_both_backends(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.openvino", "--short", "--concurrency", "1,4"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "openvino.json").read_text())
    for where in ("served", "inprocess"):
        assert set(results["speed"][where]) == BACKENDS
        for backend, report in results["speed"][where].items():
            points = report["points"]
            assert [p["concurrency"] for p in points] == [1, 4], (where, backend)
            for point in points:
                assert point["errors"] == 0 and point["infer_per_s"] > 0, (where, backend)
    memory = results["memory"]
    weights = memory["model"]["weights_bytes"]
    for backend in BACKENDS:
        runs = memory[backend]
        assert set(runs) == {"alone", "1", "8"}, backend
        assert all(run["errors"] == 0 and run["infer_per_s"] > 0 for run in runs.values())
        # Eight executions in flight share the one loaded copy of the weights.
        growth = runs["8"]["after_load"]["anonymous"] - runs["1"]["after_load"]["anonymous"]
        assert growth < weights / 2, (backend, growth, weights)
    assert (tmp_path / "openvino.png").exists() and (tmp_path / "openvino.md").exists()
