"""``python -m benchmarks.streaming --short`` runs end to end: every path, model and
concurrency gets a row with responses and a time to first response."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Half-second windows with the server pinned to core 0: beside another test's load on the
# same core a window can pass with no response at all.
pytestmark = pytest.mark.alone  # measures rate, time or memory: run after the parallel part


@pytest.mark.slow
def test_the_short_run_measures_every_path(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.streaming", "--short", "--concurrency", "1,4"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "streaming.json").read_text())["results"]
    seen = {(r["transport"], r["model"], r["concurrency"]) for r in results}
    paths = {"gRPC ModelStreamInfer", "HTTP generate_stream", "in-process"}
    assert seen == {(p, m, c) for p in paths for m in ("burst", "chargen") for c in (1, 4)}
    for result in results:
        if result["model"] == "burst":
            assert result["responses_per_s"] > 0 and result["ttft_p50_ms"] > 0, result
            # every request of burst answers 32 responses
            assert result["responses_per_s"] >= result["requests_per_s"], result
    assert (tmp_path / "streaming.png").exists() and (tmp_path / "streaming.md").exists()
