"""``python -m benchmarks.hostile_soak`` runs end to end: legitimate HTTP and gRPC clients are
served while every attack runs, each attack ends the way the server is meant to end it, and
the report has its figures. (Eight seconds say nothing about slopes: the ten-minute run in
docs/reliability.md does.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.hostile_attacks import H2_ATTACKS, HTTP_ATTACKS

pytestmark = pytest.mark.alone  # measures rate, time or memory: run after the parallel part

ROOT = Path(__file__).resolve().parents[2]

# How Conveyor's own transport ends the attacks whose ending does not depend on timing.
EXPECTED = {
    "rapid reset": "GOAWAY ENHANCE_YOUR_CALM",
    "silent connection": "closed after",
    "gzip 1000x left open": "read, left open",
    "4 MiB of zeros": "grpc-status 3",
    "WINDOW_UPDATE of 0": "GOAWAY PROTOCOL_ERROR",
    "SETTINGS on a stream": "GOAWAY PROTOCOL_ERROR",
    "slow HTTP/1.1 head": "HTTP 408",
}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_short_hostile_soak_serves_the_clients_and_runs_every_attack() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.hostile_soak", "--seconds", "8", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
    )
    # Exit code 1 may only mean the slopes of 8 s were steep (warm-up): judged below.
    assert done.returncode in (0, 1), done.stdout + done.stderr
    result = json.loads(done.stdout)
    for protocol in ("http", "grpc"):
        counts = result["requests"][protocol]
        assert counts["ok"] > 0 and counts["per_second"] > 0, result["requests"]
        assert counts["failed"] == 0, result["failures"]
    assert set(result["attacks"]) == {*H2_ATTACKS, *HTTP_ATTACKS}
    for name, outcomes in result["attacks"].items():
        assert sum(outcomes.values()) >= 1, f"{name} never ran"
        if name in EXPECTED:
            assert all(outcome.startswith(EXPECTED[name]) for outcome in outcomes), (name, outcomes)
    for field in (
        "rss_mb_first", "rss_mb_last", "rss_slope_bytes_per_s",
        "fds_first", "fds_last", "fds_slope_per_s", "flat", "passed",
    ):  # fmt: skip
        assert field in result, field
    assert len(result["samples"]) >= 8
    assert result["exit_code"] == 0 and result["server_tracebacks"] == 0
