"""Texts of different lengths sent at once over HTTP, as the benchmark's load sends them:
the encoder batches them (padded to the longest) and each request gets its own embedding."""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http.aio as aioclient

from conveyor.examples.minilm.repository import write_models
from conveyor.testing import RunningServer, run_server
from tests.examples.minilm.reference import assert_matches, load_reference

SENTENCES, EXPECTED, _ = load_reference()
IN_FLIGHT = 16


@pytest.fixture(scope="module")
def server(
    minilm_weights: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("minilm_batching")
    write_models(minilm_weights, root)
    for name in ("minilm_openvino", "minilm_encoder_openvino"):  # not used here: a faster start
        shutil.rmtree(root / name, ignore_errors=True)
    with run_server(root, ready_timeout=300) as running:
        yield running


async def embed_all_at_once(url: str, order: list[int]) -> tuple[list[np.ndarray], int, int]:
    """One request per index of ``order``, all in flight together; their embeddings and the
    encoder's (inferences, executions) over them."""
    client = aioclient.InferenceServerClient(url, conn_limit=IN_FLIGHT)
    try:

        async def one(index: int) -> np.ndarray:
            tensor = aioclient.InferInput("TEXT", [1], "BYTES")
            tensor.set_data_from_numpy(np.array([SENTENCES[index].encode()], dtype=object))
            result = await client.infer("minilm", [tensor])
            embedding = result.as_numpy("EMBEDDING")
            assert embedding is not None
            return embedding

        async def counts() -> tuple[int, int]:
            (stats,) = (await client.get_inference_statistics("minilm_encoder"))["model_stats"]
            return int(stats["inference_count"]), int(stats["execution_count"])

        before = await counts()
        rows = await asyncio.gather(*(one(index) for index in order))
        after = await counts()
        return rows, after[0] - before[0], after[1] - before[1]
    finally:
        await client.close()


def test_concurrent_texts_of_different_lengths_each_get_their_own_embedding(
    server: RunningServer,
) -> None:
    url = server.http_url.removeprefix("http://")
    order = list(range(len(SENTENCES))) * (IN_FLIGHT // len(SENTENCES) * 2)
    batched = False
    for round_number in range(5):  # batching depends on timing: a few rounds make it certain
        random.Random(round_number).shuffle(order)
        rows, inferences, executions = asyncio.run(embed_all_at_once(url, order))
        assert_matches(np.concatenate(rows), EXPECTED[order])
        assert inferences == len(order)
        batched = executions < inferences
        if batched:
            break
    assert batched, "the encoder never ran two of the concurrent requests together"
