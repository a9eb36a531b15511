"""Without the weights the built-in examples still serve, and the log says how to add minilm."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

from conveyor.examples.minilm import INSTALL_COMMAND
from conveyor.testing import run_server


def test_examples_serve_without_minilm_and_say_how_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "CONVEYOR_MINILM_DIR": str(tmp_path / "no-weights")}
    with run_server(env=env) as server:
        with urllib.request.urlopen(f"{server.http_url}/v2/models/tiny/ready") as response:
            assert response.status == 200
        try:
            urllib.request.urlopen(f"{server.http_url}/v2/models/minilm/ready")
            raise AssertionError("minilm is served without its weights")
        except urllib.error.HTTPError as exc:
            assert exc.code in (400, 404)
        assert INSTALL_COMMAND in server.output()
