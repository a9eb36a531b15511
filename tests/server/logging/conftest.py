"""One real server for the logging tests that change its settings at run time.

It serves the built-in example repository with ``--model-control explicit --load-model
tiny``, so a test can reload ``tiny`` to make the engine log an INFO line. Every test gets
the settings the server started with back afterwards (a null value resets a setting).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.server.log_settings import EXPECTED
from conveyor.testing import RunningServer, run_server


@pytest.fixture(scope="package")
def server() -> Iterator[RunningServer]:
    with run_server(extra_args=["--model-control", "explicit", "--load-model", "tiny"]) as running:
        yield running


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    yield client
    client.update_log_settings(dict.fromkeys(EXPECTED))  # back to the start values
    client.close()


@pytest.fixture
def grpc(
    server: RunningServer, http: httpclient.InferenceServerClient
) -> Iterator[grpcclient.InferenceServerClient]:
    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    yield client
    client.close()
