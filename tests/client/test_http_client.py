"""Conveyor's own HTTP client against the real server: futures, await, errors, every datatype."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from conveyor.client import Client, as_completed
from conveyor.errors import InvalidInput, ModelNotFound
from conveyor.protocol.datatypes import DATATYPES
from conveyor.testing import RunningServer
from tests.tensors import sample


@pytest.fixture(scope="module")
def client(server: RunningServer):
    with Client(server.http_url) as ours:
        yield ours


@pytest.mark.parametrize("datatype", DATATYPES)
def test_our_client_every_datatype(client, datatype: str) -> None:
    value = sample(datatype)
    result = client.submit(f"echo_{datatype}", {"INPUT0": value}).result(30)
    assert list(result) == ["OUTPUT0", "OUTPUT1"]
    assert result["OUTPUT0"].dtype == value.dtype
    assert result["OUTPUT0"].tolist() == value.tolist()


def test_our_client_json_mode(server: RunningServer) -> None:
    with Client(server.http_url, binary_data=False) as json_client:
        value = sample("BYTES", utf8=True)
        result = json_client.submit("echo_BYTES", {"INPUT0": value}, outputs=["OUTPUT1"])
        assert result.result(30)["OUTPUT1"].tolist() == value.tolist()


def test_our_client_futures_and_as_completed(client) -> None:
    futures = [
        client.submit("tiny", {"INPUT0": np.full((1, 16), i, np.float32)}, request_id=str(i))
        for i in range(32)
    ]
    seen = set()
    for future in as_completed(futures, timeout=30):
        seen.add(future.request_id)
        assert future.result()["OUTPUT0"][0, 0] == int(future.request_id) + 1
    assert seen == {str(i) for i in range(32)}


def test_our_client_await(client) -> None:
    async def main() -> list[float]:
        outputs = await asyncio.gather(
            *(client.infer("tiny", {"INPUT0": np.full((1, 16), i, np.float32)}) for i in range(8))
        )
        return [o["OUTPUT0"][0, 0] for o in outputs]

    assert asyncio.run(main()) == [i + 1 for i in range(8)]


def test_our_client_metadata_calls(client) -> None:
    assert client.server_live() and client.server_ready()
    assert client.model_ready("tiny") and not client.model_ready("nope")
    assert client.server_metadata()["name"] == "conveyor"
    assert client.model_metadata("tiny", 1)["versions"] == ["1"]
    assert client.model_config("batched")["max_batch_size"] == 8
    assert client.statistics("tiny")["model_stats"][0]["name"] == "tiny"
    assert len(client.statistics()["model_stats"]) > 2


def test_our_client_raises_conveyor_errors(server: RunningServer) -> None:
    with Client(server.http_url) as client:
        with pytest.raises(ModelNotFound, match="not in the repository"):
            client.submit("missing", {"INPUT0": np.zeros((1, 16), np.float32)}).result(10)
        with pytest.raises(InvalidInput, match="expected FP32"):
            client.submit("tiny", {"INPUT0": np.zeros((1, 16), np.int32)}).result(10)
        with pytest.raises(InvalidInput, match="cannot be sent over V2"):
            client.submit("tiny", {"INPUT0": np.zeros((1, 16), np.float32)}, priority=5)


def test_closing_our_client_cancels_what_is_in_flight(server: RunningServer) -> None:
    client = Client(server.http_url)
    future = client.submit("sleep", {"INPUT0": np.array([0.5], np.float32)})
    client.close()
    assert future.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        client.submit("tiny", {"INPUT0": np.zeros((1, 16), np.float32)})


def test_client_is_public_at_the_top_level(server: RunningServer) -> None:
    import conveyor

    with conveyor.Client(server.http_url) as client:
        assert client.submit("tiny", {"INPUT0": np.zeros((1, 16), np.float32)}).result(10)[
            "OUTPUT0"
        ].tolist() == [[1.0] * 16]
    with pytest.raises(ValueError, match="unsupported URL scheme"):
        conveyor.Client("ftp://x")
