"""Ensembles too deep for the stack are refused at load, naming the model and the limit;
long chains and nestings within the limit are served (no recursion grows with either)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.repository.ensemble import MAX_NESTING
from conveyor.testing import RunningServer, run_server

IO = """
[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [4]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [4]
"""

IDENTITY = """
class Model:
    def infer(self, inputs):
        return {"OUTPUT0": inputs["INPUT0"]}
"""

CHAIN_STEPS = 1000
# Outer ensembles sort first, so loading the outermost loads every level below it first.
TOO_DEEP = 300


def step(model: str, source: str, target: str) -> str:
    return (
        f'[[steps]]\nmodel = "{model}"\ninput_map = {{ INPUT0 = "{source}" }}\n'
        f'output_map = {{ OUTPUT0 = "{target}" }}\n'
    )


def write_ensemble(root: Path, name: str, steps: str) -> None:
    (root / name / "1").mkdir(parents=True)
    (root / name / "config.toml").write_text('backend = "ensemble"\n' + IO + steps)


def nest_name(level: int) -> str:
    """Level 1 runs ``identity``; level n runs level n-1. Deeper levels sort first."""
    return f"nest_{TOO_DEEP - level:04d}"


@pytest.fixture(scope="module")
def deep_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("deep-ensembles")
    (root / "identity" / "1").mkdir(parents=True)
    (root / "identity" / "1" / "model.py").write_text(IDENTITY)
    (root / "identity" / "config.toml").write_text('backend = "python"\n' + IO)
    chain = "".join(
        step(
            "identity",
            "INPUT0" if i == 0 else f"t{i}",
            "OUTPUT0" if i == CHAIN_STEPS - 1 else f"t{i + 1}",
        )
        for i in range(CHAIN_STEPS)
    )
    write_ensemble(root, "chain", chain)
    for level in range(1, TOO_DEEP + 1):
        inner = "identity" if level == 1 else nest_name(level - 1)
        write_ensemble(root, nest_name(level), step(inner, "INPUT0", "OUTPUT0"))
    with run_server(root, extra_args=["--no-strict-readiness"], ready_timeout=120) as running:
        yield running
        assert running.process.poll() is None, running.output()


def infer(server: RunningServer, model: str) -> tuple[int, Any]:
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}
    request = urllib.request.Request(
        f"{server.http_url}/v2/models/{model}/infer", json.dumps(body).encode(), method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def index(server: RunningServer) -> dict[str, dict[str, Any]]:
    request = urllib.request.Request(f"{server.http_url}/v2/repository/index", b"", method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return {entry["name"]: entry for entry in json.loads(answer.read())}


def test_a_long_chain_is_served(deep_server: RunningServer) -> None:
    status, answer = infer(deep_server, "chain")
    assert status == 200, answer
    assert answer["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


def test_nesting_up_to_the_limit_is_served(deep_server: RunningServer) -> None:
    status, answer = infer(deep_server, nest_name(MAX_NESTING))
    assert status == 200, answer
    assert answer["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


def test_nesting_past_the_limit_is_refused_at_load(deep_server: RunningServer) -> None:
    entries = index(deep_server)
    first_refused = nest_name(MAX_NESTING + 1)
    reason = entries[first_refused]["reason"]
    assert entries[first_refused]["state"] == "UNAVAILABLE"
    assert f"model {first_refused!r}: ensembles nest {MAX_NESTING + 1} deep" in reason
    assert f"the most this server loads is {MAX_NESTING}" in reason
    outermost = entries[nest_name(TOO_DEEP)]
    assert outermost["state"] == "UNAVAILABLE"
    # Each enclosing ensemble names its step and ends with the deepest cause, in bounded words.
    assert outermost["reason"].endswith(f"the most this server loads is {MAX_NESTING}")
    assert len(outermost["reason"]) < 2000
    for model in (first_refused, nest_name(TOO_DEEP)):
        status, answer = infer(deep_server, model)
        assert status == 404 and "Recursion" not in answer["error"], answer
    # The server goes on serving the others.
    assert infer(deep_server, "identity")[0] == 200
