"""conveyor.Client.stream_responses over gRPC (ModelStreamInfer) and HTTP (generate_stream)."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conveyor.client import BaseClient, Client
from conveyor.testing import RunningServer, run_server
from tests.engine.decoupled.models import CHARGEN, build
from tests.polling import wait_until


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = build(tmp_path_factory.mktemp("client_streaming"))
    shutil.copytree(CHARGEN, root / "chargen")
    return root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    with run_server(repository) as running:
        yield running


@pytest.fixture(params=["grpc", "http"])
def client(request: pytest.FixtureRequest, server: RunningServer) -> Iterator[BaseClient]:
    url = server.grpc_url if request.param == "grpc" else server.http_url
    with Client(url) as remote:
        yield remote


def repeat_inputs(count: int, delay_ms: int) -> dict[str, np.ndarray]:
    return {"COUNT": np.array([count], np.int32), "DELAY_MS": np.array([delay_ms], np.int32)}


def test_responses_arrive_as_they_are_produced(client: BaseClient):
    stamps = []
    for outputs in client.stream_responses("repeat", repeat_inputs(4, 150)):
        assert outputs["OUT"].dtype == np.int32
        stamps.append((time.monotonic(), int(outputs["OUT"][0])))
    assert [value for _, value in stamps] == [0, 1, 2, 3]
    assert stamps[-1][0] - stamps[0][0] >= 0.3


def test_text_tokens_async(client: BaseClient):
    async def collect() -> str:
        text = np.array([b"stream"], dtype=object)
        stream = client.stream_responses("chargen", {"text_input": text})
        return "".join([o["text_output"][0].decode() async for o in stream])

    assert asyncio.run(collect()) == "stream"


def test_a_model_that_is_not_decoupled_answers_once(server: RunningServer):
    # Over gRPC: generate's JSON (HTTP) carries flat inputs, and tiny's is two-dimensional.
    with Client(server.grpc_url) as client:
        stream = client.stream_responses("tiny", {"INPUT0": np.ones((1, 16), np.float32)})
        answers = list(stream)
    assert len(answers) == 1 and answers[0]["OUTPUT0"].shape == (1, 16)


def test_closing_the_stream_stops_the_model(client: BaseClient, repository: Path):
    progress = repository / "repeat" / "1" / "progress"
    progress.write_text("")
    stream = client.stream_responses("repeat", repeat_inputs(100_000, 5))
    next(stream)
    stream.close()
    wait_until(lambda: progress.read_text().startswith("closed at"), timeout=20)
