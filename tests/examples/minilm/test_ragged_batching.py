"""Ragged batching (``allow_ragged_batch``): requests whose inputs differ in length share one
execution, padded to the longest, and each gets exactly its own rows back."""

from __future__ import annotations

import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.errors import RepositoryError
from conveyor.repository.config import parse_config
from conveyor.repository.pbtxt import read_pbtxt
from conveyor.testing import RunningServer, run_server
from tests.examples.minilm.ragged_model import RAGGED_CONFIG, RAGGED_MODEL
from tests.models import RepoBuilder


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    builder = RepoBuilder(tmp_path_factory.mktemp("ragged"))
    builder.python("ragged", RAGGED_MODEL, RAGGED_CONFIG)
    with run_server(builder.path) as running:
        yield running


def test_requests_of_different_lengths_share_one_execution(server: RunningServer) -> None:
    client = httpclient.InferenceServerClient(
        server.http_url.removeprefix("http://"), concurrency=3
    )
    try:
        # 1 + 2 + 1 rows: a full batch of 4, of widths 3, 7 and 5.
        requests = [
            np.arange(1, 4, dtype=np.int64).reshape(1, 3),
            np.arange(1, 15, dtype=np.int64).reshape(2, 7),
            np.full((1, 5), 4, dtype=np.int64),
        ]
        handles = []
        for values in requests:
            tensor = httpclient.InferInput("VALUES", list(values.shape), "INT64")
            tensor.set_data_from_numpy(values)
            handles.append(client.async_infer("ragged", [tensor]))
        results = [handle.get_result() for handle in handles]
    finally:
        client.close()
    executions = {int(r.as_numpy("EXECUTION")[0, 0]) for r in results}
    assert len(executions) == 1  # one execution for all of them
    for values, result in zip(requests, results, strict=True):
        # Its own rows, no others, summed over its own values (padding adds zeros).
        np.testing.assert_array_equal(result.as_numpy("SUM"), values.sum(axis=1, keepdims=True))
        assert set(result.as_numpy("WIDTH").ravel().tolist()) == {7}  # padded to the longest
    config = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        (spec,) = config.get_model_config("ragged")["input"]
    finally:
        config.close()
    assert spec["allow_ragged_batch"] is True


def test_allow_ragged_batch_must_be_a_boolean() -> None:
    config = textwrap.dedent(RAGGED_CONFIG).replace(
        "allow_ragged_batch = true", 'allow_ragged_batch = "yes"'
    )
    with pytest.raises(RepositoryError, match="allow_ragged_batch must be true or false"):
        parse_config("ragged", tomllib.loads(config))


def test_config_pbtxt_allow_ragged_batch_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.pbtxt"
    path.write_text(
        'backend: "python"\n'
        "max_batch_size: 8\n"
        "dynamic_batching { }\n"
        'input [ { name: "VALUES" data_type: TYPE_INT64 dims: [ -1 ] allow_ragged_batch: true },\n'
        '        { name: "SCALE" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "SUM" data_type: TYPE_INT64 dims: [ 1 ] } ]\n'
    )
    read = read_pbtxt(path, "m", backend="python", no_backend=lambda: RepositoryError("none"))
    ragged = {spec.name: spec.allow_ragged_batch for spec in read.config.inputs}
    assert ragged == {"VALUES": True, "SCALE": False}


def test_grpc_model_config_reports_allow_ragged_batch(server: RunningServer) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    try:
        config = client.get_model_config("ragged", as_json=True)["config"]
    finally:
        client.close()
    assert [spec.get("allow_ragged_batch") for spec in config["input"]] == [True]
