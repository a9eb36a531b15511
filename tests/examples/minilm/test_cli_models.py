"""``conveyor models --run`` with the weights installed: the MiniLM models load and run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conveyor.examples.minilm.repository import openvino_available


def test_cli_models_runs_minilm(minilm_weights: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "conveyor", "models", "--run"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    names = ["minilm", "minilm_tokenizer", "minilm_encoder"]
    if openvino_available():
        names += ["minilm_openvino", "minilm_encoder_openvino"]
    for name in names:
        assert f"{name}" in out.stdout
    assert out.stdout.count("READY") == 5 + len(names)
    assert "EMBEDDING = " in out.stdout
