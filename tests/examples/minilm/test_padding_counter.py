"""The padding waste of ragged batches, counted by the engine and exported as Prometheus
counters: requests of different lengths are sent concurrently to a real server, and the
counters must equal the padding computed from their lengths and the batches formed."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from tests.examples.minilm.ragged_model import RAGGED_CONFIG, RAGGED_MODEL
from tests.models import RepoBuilder

PADDING = "conveyor_ragged_padding_elements"
REAL = "conveyor_ragged_real_elements"

# The ragged model with a second input, SCALE, batched but not ragged: its elements are not
# counted. The model reports, for each row, the width it was padded to and which execution
# ran it, so the test knows the batches the engine formed.
SCALED_CONFIG = (
    RAGGED_CONFIG
    + """
[[inputs]]
name = "SCALE"
datatype = "INT64"
shape = [1]
"""
)

# Each round is one full batch of 4 rows: (rows, width) per request.
ROUNDS = (
    ((1, 3), (2, 7), (1, 5)),  # padded to 7: 1*4 + 2*0 + 1*2 = 6 zeros, 22 real
    ((1, 2), (1, 9), (1, 9), (1, 4)),  # padded to 9: 7 + 0 + 0 + 5 = 12 zeros, 24 real
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    builder = RepoBuilder(tmp_path_factory.mktemp("padding"))
    builder.python("ragged", RAGGED_MODEL, SCALED_CONFIG)
    builder.batched()
    with run_server(builder.path) as running:
        yield running


def scrape(server: RunningServer, name: str, model: str) -> int:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    match = re.search(rf'^{name}{{model="{model}",version="1"}} (\S+)$', text, re.MULTILINE)
    assert match, f"no {name} sample for {model} in:\n{text}"
    return int(float(match.group(1)))


def send_round(server: RunningServer, shapes: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """The round's requests in flight together; (width, execution) each was run with."""
    client = httpclient.InferenceServerClient(
        server.http_url.removeprefix("http://"), concurrency=len(shapes)
    )
    try:
        handles = []
        for rows, width in shapes:
            values = httpclient.InferInput("VALUES", [rows, width], "INT64")
            values.set_data_from_numpy(np.ones((rows, width), dtype=np.int64))
            scale = httpclient.InferInput("SCALE", [rows, 1], "INT64")
            scale.set_data_from_numpy(np.ones((rows, 1), dtype=np.int64))
            handles.append(client.async_infer("ragged", [values, scale]))
        results = [handle.get_result() for handle in handles]
    finally:
        client.close()
    return [(int(r.as_numpy("WIDTH")[0, 0]), int(r.as_numpy("EXECUTION")[0, 0])) for r in results]


def test_padding_counter_equals_the_padding_of_the_formed_batches(server: RunningServer) -> None:
    assert scrape(server, PADDING, "ragged") == 0
    expected_padding = expected_real = 0
    for shapes in ROUNDS:
        ran = send_round(server, shapes)
        assert len({execution for _, execution in ran}) == 1  # the round was one batch
        for (rows, width), (padded_to, _) in zip(shapes, ran, strict=True):
            assert padded_to == max(w for _, w in shapes)
            expected_real += rows * width
            expected_padding += rows * (padded_to - width)
    assert (expected_padding, expected_real) == (18, 46)  # the lengths' own arithmetic
    assert scrape(server, PADDING, "ragged") == expected_padding
    assert scrape(server, REAL, "ragged") == expected_real


def test_a_model_without_ragged_inputs_counts_nothing(server: RunningServer) -> None:
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        (spec,) = client.get_model_metadata("batched")["inputs"]
        tensor = httpclient.InferInput(spec["name"], [1, *spec["shape"][1:]], spec["datatype"])
        tensor.set_data_from_numpy(np.ones([1, *spec["shape"][1:]], dtype=np.float32))
        client.infer("batched", [tensor])
    finally:
        client.close()
    assert scrape(server, PADDING, "batched") == 0
    assert scrape(server, REAL, "batched") == 0
