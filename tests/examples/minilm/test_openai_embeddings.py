"""``minilm`` on OpenAI's embeddings API, called with the ``openai`` client: the same floats
as V2 infer, and usage counted by the real tokenizer."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openai
import pytest
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from tests.examples.minilm.reference import assert_matches, load_reference
from tests.polling import wait_until

ALL, ALL_EXPECTED, _ = load_reference()
# OpenAI's API refuses an empty text; the reference set has one.
KEEP = [index for index, sentence in enumerate(ALL) if sentence]
SENTENCES, EXPECTED = [ALL[index] for index in KEEP], ALL_EXPECTED[KEEP]


@pytest.fixture(scope="module")
def server(minilm_weights: Path) -> Iterator[RunningServer]:
    with run_server(ready_timeout=300) as running:
        yield running


def test_openai_client_gets_the_v2_embeddings_and_token_usage(server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{server.http_url}/v1", api_key="unused", max_retries=0)
    answer = client.embeddings.create(model="minilm", input=SENTENCES, encoding_format="float")
    got = np.array([item.embedding for item in answer.data], dtype=np.float32)
    assert_matches(got, EXPECTED)

    v2 = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    tensor = httpclient.InferInput("TEXT", [len(SENTENCES)], "BYTES")
    tensor.set_data_from_numpy(np.array([s.encode() for s in SENTENCES], dtype=object))
    wanted = [httpclient.InferRequestedOutput("EMBEDDING")]
    result = v2.infer("minilm", [tensor], outputs=wanted)
    assert got.tobytes() == result.as_numpy("EMBEDDING").tobytes()

    # "hello world": [CLS] hello world [SEP], as the tokenizer counts it.
    one = client.embeddings.create(model="minilm", input="hello world")
    assert (one.usage.prompt_tokens, one.usage.total_tokens) == (4, 4)
    assert "minilm" in [model.id for model in client.models.list()]


def test_openai_and_v2_requests_share_the_encoders_batches(server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{server.http_url}/v1", api_key="unused", max_retries=0)
    url = server.http_url.removeprefix("http://")

    def encoder() -> tuple[int, int]:
        v2 = httpclient.InferenceServerClient(url)
        (stats,) = v2.get_inference_statistics("minilm_encoder")["model_stats"]
        return int(stats["inference_count"]), int(stats["execution_count"])

    def by_openai(text: str) -> None:
        client.embeddings.create(model="minilm", input=text)

    def by_v2(text: str) -> None:
        v2 = httpclient.InferenceServerClient(url)
        tensor = httpclient.InferInput("TEXT", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([text.encode()], dtype=object))
        v2.infer("minilm", [tensor], outputs=[httpclient.InferRequestedOutput("EMBEDDING")])

    texts, before = 0, encoder()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        # Rounds of OpenAI and V2 requests at once, until some ran in a shared batch.
        for _ in range(20):
            calls = [pool.submit(by_openai, s) for s in SENTENCES[:8]]
            calls += [pool.submit(by_v2, s) for s in SENTENCES[:8]]
            for call in calls:
                call.result(timeout=60)
            texts += len(calls)
            # Every text of both kinds reaches the one encoder queue (its statistics are
            # recorded just after the answers go out).
            wait_until(lambda n=texts: encoder()[0] - before[0] == n, what="the encoder's count")
            inferences, executions = (a - b for a, b in zip(encoder(), before, strict=True))
            if executions < inferences:
                break
    assert executions < inferences  # some executions held more than one request


def test_token_ids_to_the_encoder_equal_the_texts_embeddings(server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{server.http_url}/v1", api_key="unused", max_retries=0)
    url = server.http_url.removeprefix("http://")
    texts = ["hello world", "A much longer sentence about the quick brown fox."]
    # The ids minilm's own tokenizer makes of them, as a client that tokenizes sends them.
    v2 = httpclient.InferenceServerClient(url)
    tensor = httpclient.InferInput("TEXT", [len(texts)], "BYTES")
    tensor.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
    tokens = v2.infer("minilm_tokenizer", [tensor])
    ids, mask = tokens.as_numpy("input_ids"), tokens.as_numpy("attention_mask")
    assert ids is not None and mask is not None
    rows = [
        [int(i) for i, m in zip(row, keep, strict=True) if m]
        for row, keep in zip(ids, mask, strict=True)
    ]

    by_ids = client.embeddings.create(model="minilm_encoder", input=rows, encoding_format="float")
    by_text = client.embeddings.create(model="minilm", input=texts, encoding_format="float")
    got = np.array([item.embedding for item in by_ids.data], dtype=np.float32)
    want = np.array([item.embedding for item in by_text.data], dtype=np.float32)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert by_ids.usage.prompt_tokens == by_text.usage.prompt_tokens == int(mask.sum())
    assert {"minilm", "minilm_encoder"} <= {model.id for model in client.models.list()}
    # The ensemble takes text only: ids sent to it are refused in OpenAI's shape.
    with pytest.raises(openai.BadRequestError, match="token-id inputs are not accepted"):
        client.embeddings.create(model="minilm", input=rows)
