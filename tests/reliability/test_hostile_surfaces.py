"""Requests a hostile client sends to the newer HTTP surfaces (generate, requested outputs)
that once answered 500: each is now a 4xx naming the field, and the server serves on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder
from tests.server.http.http_util import request

# An INT32 input and a UINT32 one, through generate (one answer per request).
ECHO_MODEL = """
class Model:
    def infer(self, inputs):
        return {"OUT": inputs["IN"] + inputs["SHIFT"].astype("int32")}
"""

ECHO_CONFIG = """
backend = "python"

[[inputs]]
name = "IN"
datatype = "INT32"
shape = [-1]

[[inputs]]
name = "SHIFT"
datatype = "UINT32"
shape = [-1]

[[outputs]]
name = "OUT"
datatype = "INT32"
shape = [-1]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root: Path = tmp_path_factory.mktemp("hostile-surfaces")
    builder = RepoBuilder(root)
    builder.tiny("tiny")
    builder.python("shift", ECHO_MODEL, ECHO_CONFIG)
    with run_server(root) as running:
        yield running
        assert running.process.poll() is None, running.output()


def post(server: RunningServer, path: str, body: Any) -> tuple[int, Any]:
    status, _, data = request(server.http_url, "POST", path, json.dumps(body).encode())
    return status, json.loads(data)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("IN", 10**30, "INT32 data must be integers"),  # orjson reads it as a float
        ("IN", 2**40, "value 1099511627776 is out of range for INT32"),
        ("IN", [1, 2.5], "INT32 data must be integers"),
        ("IN", True, "INT32 data must be integers"),
        ("SHIFT", -1, "value -1 is out of range for UINT32"),
        ("SHIFT", 2**32, "value 4294967296 is out of range for UINT32"),
        ("IN", "9" * 400, "must hold INT32 values, got '99999"),
        ("SHIFT", ["-1"], "must hold UINT32 values"),
    ],
)
@pytest.mark.parametrize("endpoint", ["generate", "generate_stream"])
def test_generate_values_out_of_range_are_400(
    server: RunningServer, endpoint: str, field: str, value: Any, words: str
) -> None:
    body = {"IN": [1], "SHIFT": [0], field: value}
    status, _, data = request(
        server.http_url, "POST", f"/v2/models/shift/{endpoint}", json.dumps(body).encode()
    )
    assert status == 400, data
    message = json.loads(data)["error"]
    assert f"generate request field {field!r}" in message and words in message, message
    assert len(message) < 400  # a huge value is not echoed back whole
    # The same model answers a good request next.
    status, answer = post(server, "/v2/models/shift/generate", {"IN": [1, 2], "SHIFT": [3, 3]})
    assert status == 200 and answer["OUT"] == [4, 5], answer


@pytest.mark.parametrize("model", ["tiny", "shift"])
def test_an_empty_outputs_list_asks_for_every_output(server: RunningServer, model: str) -> None:
    """As in Triton (and gRPC, where an empty list is no list): not a 500 from a model run
    that was asked for nothing."""
    if model == "tiny":
        inputs = [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [1] * 16}]
        expected = {"OUTPUT0": [2.0] * 16}
    else:
        inputs = [
            {"name": "IN", "datatype": "INT32", "shape": [2], "data": [1, 2]},
            {"name": "SHIFT", "datatype": "UINT32", "shape": [2], "data": [1, 1]},
        ]
        expected = {"OUT": [2, 3]}
    status, answer = post(server, f"/v2/models/{model}/infer", {"inputs": inputs, "outputs": []})
    assert status == 200, answer
    assert {o["name"]: o["data"] for o in answer["outputs"]} == expected
