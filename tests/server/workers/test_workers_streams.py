"""Streams through front-end processes: decoupled models over gRPC ModelStreamInfer and
the generate extension over HTTP, each response as the engine process produces it."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator

import numpy as np
import pytest

from conveyor.client import BaseClient, Client
from conveyor.testing import RunningServer, run_server
from tests.engine.decoupled.models import CHARGEN, build
from tests.server.workers.workers_util import wait_front_ends

pytestmark = pytest.mark.workers


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = build(tmp_path_factory.mktemp("workers_streaming"))
    shutil.copytree(CHARGEN, root / "chargen")
    with run_server(root, extra_args=["--workers", "2"]) as running:
        wait_front_ends(running, 2)
        yield running


@pytest.fixture(params=["grpc", "http"])
def client(request: pytest.FixtureRequest, server: RunningServer) -> Iterator[BaseClient]:
    url = server.grpc_url if request.param == "grpc" else server.http_url
    with Client(url) as remote:
        yield remote


def test_responses_arrive_as_they_are_produced(client: BaseClient) -> None:
    inputs = {"COUNT": np.array([4], np.int32), "DELAY_MS": np.array([150], np.int32)}
    stamps = []
    for outputs in client.stream_responses("repeat", inputs):
        stamps.append((time.monotonic(), int(outputs["OUT"][0])))
    assert [value for _, value in stamps] == [0, 1, 2, 3]
    assert stamps[-1][0] - stamps[0][0] >= 0.3  # streamed, not gathered then sent


def test_text_tokens(client: BaseClient) -> None:
    async def collect() -> str:
        text = np.array([b"stream"], dtype=object)
        stream = client.stream_responses("chargen", {"text_input": text})
        return "".join([o["text_output"][0].decode() async for o in stream])

    assert asyncio.run(collect()) == "stream"


def test_an_unknown_model_fails_the_stream_with_its_status(client: BaseClient) -> None:
    with pytest.raises(Exception, match="missing"):
        list(client.stream_responses("missing", {"COUNT": np.array([1], np.int32)}))
