"""``minilm`` served by ``conveyor serve`` (no repository: the built-in examples), called with
tritonclient over HTTP, against sentence-transformers' own embeddings."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.examples.minilm.repository import openvino_available
from conveyor.testing import RunningServer, run_server
from tests.examples.minilm.reference import assert_matches, load_reference

SENTENCES, EXPECTED, _ = load_reference()
MODELS = [
    "minilm",
    pytest.param(
        "minilm_openvino",
        marks=pytest.mark.skipif(not openvino_available(), reason="OpenVINO is not installed"),
    ),
]


@pytest.fixture(scope="module")
def server(minilm_weights: Path) -> Iterator[RunningServer]:
    with run_server(ready_timeout=300) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: RunningServer) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    yield client
    client.close()


def embed(client: httpclient.InferenceServerClient, model: str, texts: list[bytes]) -> np.ndarray:
    tensor = httpclient.InferInput("TEXT", [len(texts)], "BYTES")
    tensor.set_data_from_numpy(np.array(texts, dtype=object))
    result = client.infer(model, [tensor]).as_numpy("EMBEDDING")
    assert result is not None
    return result


@pytest.mark.parametrize("model", MODELS)
def test_one_batch_matches_sentence_transformers(
    client: httpclient.InferenceServerClient, model: str
) -> None:
    got = embed(client, model, [s.encode("utf-8") for s in SENTENCES])
    assert_matches(got, EXPECTED)


@pytest.mark.parametrize("model", MODELS)
def test_each_sentence_alone_matches(client: httpclient.InferenceServerClient, model: str) -> None:
    """Alone, a text has no padding: the same embedding as padded in a batch."""
    rows = [embed(client, model, [sentence.encode("utf-8")]) for sentence in SENTENCES]
    assert_matches(np.concatenate(rows), EXPECTED)


def test_metadata_declares_text_in_embedding_out(client: httpclient.InferenceServerClient) -> None:
    metadata = client.get_model_metadata("minilm")
    assert metadata["platform"] == "ensemble"
    assert metadata["inputs"] == [{"name": "TEXT", "datatype": "BYTES", "shape": [-1]}]
    assert metadata["outputs"] == [
        {"name": "EMBEDDING", "datatype": "FP32", "shape": [-1, 384]},
        # The tokenizer's mask: OpenAI's /v1/embeddings counts tokens from it.
        {"name": "attention_mask", "datatype": "INT64", "shape": [-1, -1]},
    ]
    steps = client.get_model_config("minilm")["ensemble_scheduling"]["step"]
    assert [step["model_name"] for step in steps] == ["minilm_tokenizer", "minilm_encoder"]


def test_tokenizer_truncates_at_max_seq_length(client: httpclient.InferenceServerClient) -> None:
    longest = max(SENTENCES, key=len)
    tensor = httpclient.InferInput("TEXT", [2], "BYTES")
    tensor.set_data_from_numpy(np.array([longest.encode(), b""], dtype=object))
    result = client.infer("minilm_tokenizer", [tensor])
    ids, mask = result.as_numpy("input_ids"), result.as_numpy("attention_mask")
    assert ids is not None and mask is not None
    assert ids.shape == mask.shape == (2, 256)
    assert (ids[0, 0], ids[0, -1]) == (101, 102)  # [CLS] ... [SEP], cut to fit
    assert mask[0].sum() == 256 and mask[1].sum() == 2  # the empty text: [CLS] [SEP]
    assert list(ids[1, :3]) == [101, 102, 0]  # padded with [PAD]


def test_text_that_is_not_utf8_is_refused(client: httpclient.InferenceServerClient) -> None:
    tensor = httpclient.InferInput("TEXT", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([b"\xff\xfe"], dtype=object))
    with pytest.raises(InferenceServerException, match="not UTF-8") as caught:
        client.infer("minilm", [tensor])
    assert caught.value.status() == "400"


DOCUMENT = Path(__file__).resolve().parents[3] / "docs" / "minilm.md"


def documented_curl() -> str:
    """The curl block of docs/minilm.md, as printed."""
    text = DOCUMENT.read_text(encoding="utf-8")
    match = re.search(r"```bash\n(curl [^`]*/v2/models/minilm/infer[^`]*)```", text)
    assert match, "docs/minilm.md lost its curl example"
    return match.group(1)


def test_the_documented_curl_answers_an_embedding(server: RunningServer) -> None:
    command = documented_curl().replace("127.0.0.1:8000", server.http_url.removeprefix("http://"))
    answer = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True
    )
    (output,) = json.loads(answer.stdout)["outputs"]
    assert (output["name"], output["datatype"], output["shape"]) == ("EMBEDDING", "FP32", [1, 384])
    assert abs(np.linalg.norm(output["data"]) - 1.0) < 1e-5


def encoder_counts(client: httpclient.InferenceServerClient) -> tuple[int, int]:
    (stats,) = client.get_inference_statistics("minilm_encoder")["model_stats"]
    return int(stats["inference_count"]), int(stats["execution_count"])


def test_concurrent_texts_of_different_lengths_batch_and_keep_their_rows(
    server: RunningServer, client: httpclient.InferenceServerClient
) -> None:
    """The encoder batches ragged requests (padded to the longest); each gets its own row."""
    concurrent = httpclient.InferenceServerClient(
        server.http_url.removeprefix("http://"), concurrency=16
    )
    order = list(range(len(SENTENCES))) * 2
    longest = max(range(len(SENTENCES)), key=lambda index: len(SENTENCES[index]))
    try:
        for _ in range(5):  # batching depends on timing: a few rounds make it certain
            before = encoder_counts(client)
            # A heavy request first (the longest text, 32 times) keeps the encoder busy while
            # the small ones arrive, so they queue and can share the next execution.
            heavy = httpclient.InferInput("TEXT", [32], "BYTES")
            heavy.set_data_from_numpy(np.array([SENTENCES[longest].encode()] * 32, dtype=object))
            busy = concurrent.async_infer("minilm", [heavy])
            handles = []
            for index in order:
                tensor = httpclient.InferInput("TEXT", [1], "BYTES")
                tensor.set_data_from_numpy(np.array([SENTENCES[index].encode()], dtype=object))
                handles.append(concurrent.async_infer("minilm", [tensor]))
            rows = [handle.get_result().as_numpy("EMBEDDING") for handle in handles]
            assert_matches(np.concatenate(rows), EXPECTED[order])
            assert_matches(busy.get_result().as_numpy("EMBEDDING"), EXPECTED[[longest] * 32])
            after = encoder_counts(client)
            # Without the heavy request's 32 texts and its one execution: the small ones
            # took fewer executions than there were of them, so some shared one.
            inferences, executions = after[0] - before[0] - 32, after[1] - before[1] - 1
            if executions < inferences:
                return
    finally:
        concurrent.close()
    pytest.fail("16 concurrent requests never shared an encoder execution")
