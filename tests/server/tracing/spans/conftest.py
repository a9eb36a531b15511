"""One server in trace mode opentelemetry (every request traced) exporting to an OTLP
receiver started here (span_util reads the spans back per request)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.testing import RunningServer, run_server
from tests.server.tracing.otlp_receiver import Received, otlp_receiver
from tests.server.tracing.spans import models


@pytest.fixture(scope="package")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.build(tmp_path_factory.mktemp("span-models"))


@pytest.fixture(scope="package")
def exported(repository: Path) -> Iterator[tuple[RunningServer, Received]]:
    with otlp_receiver() as (endpoint, received):
        env = dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="20")
        config = [
            "mode=opentelemetry",
            "level=TIMESTAMPS",
            "rate=1",
            f"opentelemetry,url={endpoint}",
        ]
        args = [arg for entry in config for arg in ("--trace-config", entry)]
        with run_server(repository, extra_args=args, env=env) as server:
            yield server, received
            assert server.process.poll() is None, "the server died during the tests"


@pytest.fixture
def clients(exported: tuple[RunningServer, Received]) -> Iterator[dict[str, Any]]:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    server = exported[0]
    made = {
        "http": httpclient.InferenceServerClient(
            server.http_url.removeprefix("http://"), concurrency=4
        ),
        "grpc": grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://")),
    }
    yield made
    for client in made.values():
        client.close()
    made.clear()
    gc.collect()  # tritonclient's __del__ must run on this thread
