"""``/v1/embeddings`` and ``/v1/models`` driven by the official ``openai`` client, against
the V2 infer path on the same server."""

from __future__ import annotations

import base64
import concurrent.futures
import time
from collections.abc import Iterator

import numpy as np
import openai
import pytest
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from tests.metrics import wait_pending
from tests.server.openai.toy import write_repository

TEXTS = ["the quick brown fox", "jumps", "over the lazy dog again"]


@pytest.fixture(scope="module", params=[1, 2], ids=["workers1", "workers2"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    root = write_repository(tmp_path_factory.mktemp("repo"))
    with run_server(root, extra_args=["--workers", str(request.param)]) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.http_url}/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def v2(server: RunningServer) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))


def v2_embeddings(v2: httpclient.InferenceServerClient, texts: list[str]) -> np.ndarray:
    tensor = httpclient.InferInput("TEXT", [len(texts)], "BYTES")
    tensor.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
    result = v2.infer("toy", [tensor]).as_numpy("EMBEDDING")
    assert result is not None
    return result


def test_one_string_equals_the_v2_answer_bit_for_bit(
    client: openai.OpenAI, v2: httpclient.InferenceServerClient
) -> None:
    answer = client.embeddings.create(model="toy", input=TEXTS[0], encoding_format="float")
    assert answer.object == "list" and answer.model == "toy"
    (item,) = answer.data
    assert (item.object, item.index) == ("embedding", 0)
    got = np.array(item.embedding, dtype=np.float32)
    assert got.tobytes() == v2_embeddings(v2, TEXTS[:1])[0].tobytes()
    assert (answer.usage.prompt_tokens, answer.usage.total_tokens) == (4, 4)  # four words


def test_a_batch_answers_each_text_at_its_index(
    client: openai.OpenAI, v2: httpclient.InferenceServerClient
) -> None:
    answer = client.embeddings.create(model="toy", input=TEXTS, encoding_format="float")
    assert [item.index for item in answer.data] == [0, 1, 2]
    got = np.array([item.embedding for item in answer.data], dtype=np.float32)
    assert got.tobytes() == v2_embeddings(v2, TEXTS).tobytes()
    assert answer.usage.prompt_tokens == 4 + 1 + 5


def test_base64_is_the_little_endian_float32_bytes(
    client: openai.OpenAI, v2: httpclient.InferenceServerClient
) -> None:
    answer = client.embeddings.create(model="toy", input=TEXTS, encoding_format="base64")
    raw = [base64.b64decode(str(item.embedding)) for item in answer.data]
    got = np.frombuffer(b"".join(raw), dtype="<f4").reshape(3, 8)
    assert got.tobytes() == v2_embeddings(v2, TEXTS).tobytes()
    # The client's default asks for base64 and decodes it itself: the same floats.
    default = client.embeddings.create(model="toy", input=TEXTS)
    assert np.array([d.embedding for d in default.data], dtype=np.float32).tobytes() == (
        got.tobytes()
    )


def test_dimensions_cuts_and_renormalises(
    client: openai.OpenAI, v2: httpclient.InferenceServerClient
) -> None:
    answer = client.embeddings.create(
        model="toy", input=TEXTS[0], dimensions=3, encoding_format="float"
    )
    got = np.array(answer.data[0].embedding, dtype=np.float32)
    full = v2_embeddings(v2, TEXTS[:1])[0][:3]
    np.testing.assert_allclose(got, full / np.linalg.norm(full), rtol=1e-6)


def test_dimensions_are_refused_where_the_config_does_not_allow_them(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError, match=r"openai\.truncatable = true") as caught:
        client.embeddings.create(model="ids", input=[101, 102], dimensions=3)
    assert caught.value.param == "dimensions"


def test_unknown_model_is_openais_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.embeddings.create(model="nope", input="text")
    assert caught.value.status_code == 404
    assert caught.value.code == "model_not_found" and caught.value.param == "model"
    # A model that does not declare [openai] is not served here either.
    with pytest.raises(openai.NotFoundError, match="openai"):
        client.embeddings.create(model="plain", input="text")


def test_too_many_inputs_names_the_limit(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match=r"at most 4.*openai\.max_inputs") as caught:
        client.embeddings.create(model="toy", input=["a"] * 5)
    assert caught.value.status_code == 400 and caught.value.param == "input"
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"


def test_too_long_an_input_names_the_limit(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match=r"101 characters.*openai\.max_chars"):
        client.embeddings.create(model="toy", input="x" * 101)


def test_an_empty_string_is_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match=r"'input\[1\]' is an empty string"):
        client.embeddings.create(model="toy", input=["text", ""])
    with pytest.raises(openai.BadRequestError, match="empty string"):
        client.embeddings.create(model="toy", input="")


def test_an_empty_list_is_refused_naming_both_forms(client: openai.OpenAI) -> None:
    # Said before the model is known, so it names texts and token ids alike.
    with pytest.raises(openai.BadRequestError, match="non-empty list of strings or of token ids"):
        client.embeddings.create(model="ids", input=[])


def test_token_ids_are_refused_for_a_text_model(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="token-id inputs"):
        client.embeddings.create(model="toy", input=[[1, 2, 3]])


def v2_id_embeddings(v2: httpclient.InferenceServerClient, rows: list[list[int]]) -> np.ndarray:
    """The ids model's V2 answer for ``rows``, padded with 0 and masked as the route does."""
    longest = max(len(row) for row in rows)
    ids = np.array([row + [0] * (longest - len(row)) for row in rows], dtype=np.int64)
    mask = np.array([[1] * len(row) + [0] * (longest - len(row)) for row in rows], np.int64)
    tensors = []
    for name, array in (("IDS", ids), ("IDS_MASK", mask)):
        tensor = httpclient.InferInput(name, list(array.shape), "INT64")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    result = v2.infer("ids", tensors).as_numpy("EMBEDDING")
    assert result is not None
    return result


def test_one_list_of_token_ids_equals_the_v2_answer(
    client: openai.OpenAI, v2: httpclient.InferenceServerClient
) -> None:
    answer = client.embeddings.create(model="ids", input=[101, 7592, 2088, 102])
    (item,) = answer.data
    got = np.array(item.embedding, dtype=np.float32)
    assert got.tobytes() == v2_id_embeddings(v2, [[101, 7592, 2088, 102]])[0].tobytes()
    assert answer.usage.prompt_tokens == 4  # the ids sent
    assert np.any(got != 0)


def test_ragged_token_id_lists_are_padded_and_masked(
    client: openai.OpenAI, v2: httpclient.InferenceServerClient
) -> None:
    rows = [[101, 2023, 102], [101, 102], [101, 1037, 2936, 6251, 102]]
    answer = client.embeddings.create(model="ids", input=rows, encoding_format="float")
    got = np.array([item.embedding for item in answer.data], dtype=np.float32)
    assert got.tobytes() == v2_id_embeddings(v2, rows).tobytes()
    # Padding changes nothing: each row embeds as it does alone.
    for index, row in enumerate(rows):
        assert got[index].tobytes() == v2_id_embeddings(v2, [row])[0].tobytes()
    assert answer.usage.prompt_tokens == 3 + 2 + 5


def test_text_is_refused_by_a_token_id_model(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="takes token ids, not text") as caught:
        client.embeddings.create(model="ids", input="some text")
    assert caught.value.param == "input"


def test_bad_token_ids_are_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match=r"integers from 0 to 2\*\*63 - 1"):
        client.embeddings.create(model="ids", input=[[1, -2]])
    with pytest.raises(openai.BadRequestError, match="token ids"):
        client.embeddings.create(model="ids", input=[[1, 2**63]])  # no INT64 holds it
    with pytest.raises(openai.BadRequestError, match=r"'input\[1\]' is an empty list"):
        client.embeddings.create(model="ids", input=[[1], []])
    with pytest.raises(openai.BadRequestError, match=r"holds 5 token-id lists.*at most 4"):
        client.embeddings.create(model="ids", input=[[1]] * 5)


def test_models_lists_only_the_declared_ones(client: openai.OpenAI) -> None:
    assert sorted(model.id for model in client.models.list()) == ["ids", "toy"]
    assert client.models.retrieve("toy").id == "toy"


def test_requests_are_counted_in_the_models_statistics(
    client: openai.OpenAI, v2: httpclient.InferenceServerClient
) -> None:
    def successes() -> int:
        (stats,) = v2.get_inference_statistics("toy")["model_stats"]
        return int(stats["inference_stats"]["success"]["count"])

    before = successes()
    client.embeddings.create(model="toy", input=TEXTS)
    assert successes() == before + 1


def test_wrong_method_and_path_are_openai_errors(server: RunningServer) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{server.http_url}/v1/embeddings", timeout=10)
    assert caught.value.code == 405
    assert b'"invalid_request_error"' in caught.value.read()


def test_a_request_whose_client_went_away_never_runs(
    server: RunningServer, client: openai.OpenAI, v2: httpclient.InferenceServerClient
) -> None:
    def successes() -> int:
        (stats,) = v2.get_inference_statistics("toy")["model_stats"]
        return int(stats["inference_stats"]["success"]["count"])

    before = successes()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # The model's one instance sleeps on this request; the next one waits in the queue.
        busy = pool.submit(client.embeddings.create, model="toy", input="sleep 2")
        time.sleep(0.5)
        with pytest.raises(openai.APITimeoutError):
            client.with_options(timeout=0.5).embeddings.create(model="toy", input="queued")
        assert len(busy.result(timeout=30).data) == 1
    # Had the dropped request run, it would have run right after the sleeping one.
    time.sleep(0.5)
    assert successes() == before + 1
    # Nor is it left in the queue (under --workers 2 too, where the engine is another
    # process): nothing stays pending once both are done.
    wait_pending(server, "toy", 0)
