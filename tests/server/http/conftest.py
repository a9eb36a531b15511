"""One real server process for the HTTP tests, over a repository built here.

- ``echo_<DATATYPE>`` for every V2 datatype: INPUT0 [-1, -1] -> OUTPUT0 and OUTPUT1 (both a
  copy), so every datatype travels both ways and outputs can be picked.
- ``tiny``: ONNX Add (+1) over FP32 [-1, 16]; ``batched``: the same with max_batch_size 8
  and dynamic batching.
- ``sleep`` (2 instances) and ``gate`` (1 instance): sleep INPUT0 seconds; OUTPUT1 is
  [start, end] (time.monotonic) so tests can see what ran when.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.protocol.datatypes import DATATYPES
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder


def build_repository(root: Path) -> Path:
    builder = RepoBuilder(root)
    for datatype in DATATYPES:
        builder.echo_model(f"echo_{datatype}", datatype)
    builder.tiny("tiny")
    builder.batched("batched")
    builder.sleep_model("sleep", instances=2)
    builder.sleep_model("gate", instances=1)
    return root


@pytest.fixture(scope="session")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("http-models"))


@pytest.fixture(scope="session")
def server(repository: Path) -> Iterator[RunningServer]:
    """The shared server (model control off, default limits)."""
    with run_server(repository) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(scope="session")
def host_port(server: RunningServer) -> str:
    """``127.0.0.1:PORT``, the form tritonclient takes."""
    return server.http_url.removeprefix("http://")


@pytest.fixture(scope="session")
def triton(host_port: str):
    """One tritonclient.http client for all tests (concurrency 4 for async_infer).

    Shared and torn down here because its __del__ fails if the garbage collector happens
    to run it on another thread (gevent's hub is per thread); collect on this thread.
    """
    import gc

    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(host_port, concurrency=4)
    yield client
    client.close()
    del client
    gc.collect()
