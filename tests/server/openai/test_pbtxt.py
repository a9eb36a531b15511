"""A Triton-style ensemble declares the OpenAI door with ``openai.*`` parameters in its
config.pbtxt, and answers ``/v1/embeddings`` (driven by the ``openai`` client) exactly as
its V2 path does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openai
import pytest
import tritonclient.http as httpclient

from conveyor.errors import RepositoryError
from conveyor.repository.pbtxt import read_pbtxt
from conveyor.testing import RunningServer, run_server
from tests.server.openai.toy import write_repository

PARAMETERS = """
parameters { key: "openai.input" value: { string_value: "TEXT" } }
parameters { key: "openai.output" value: { string_value: "VECTOR" } }
parameters { key: "openai.token_mask" value: { string_value: "TOKENS" } }
parameters { key: "openai.normalize" value: { string_value: "true" } }
parameters { key: "openai.max_inputs" value: { string_value: "3" } }
"""

ENSEMBLE = """
platform: "ensemble"
max_batch_size: 0
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [
  { name: "VECTOR" data_type: TYPE_FP32 dims: [ -1, 8 ] },
  { name: "TOKENS" data_type: TYPE_INT64 dims: [ -1, -1 ] }
]
ensemble_scheduling {
  step [
    {
      model_name: "plain"
      model_version: -1
      input_map { key: "TEXT" value: "TEXT" }
      output_map { key: "EMBEDDING" value: "VECTOR" }
      output_map { key: "MASK" value: "TOKENS" }
    }
  ]
}
"""


def write_ensemble(root: Path, parameters: str = PARAMETERS) -> Path:
    """``plain`` (the toy model, no [openai]) and ``pipeline``: an ensemble over it whose
    config.pbtxt declares the OpenAI door."""
    write_repository(root)
    (root / "pipeline" / "1").mkdir(parents=True)
    (root / "pipeline" / "config.pbtxt").write_text(ENSEMBLE + parameters)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(write_ensemble(tmp_path_factory.mktemp("repo"))) as running:
        yield running


def test_the_ensemble_answers_as_its_v2_path_normalised(server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{server.http_url}/v1", api_key="unused", max_retries=0)
    assert "pipeline" in [model.id for model in client.models.list()]
    texts = ["the quick brown fox", "jumps"]
    answer = client.embeddings.create(model="pipeline", input=texts, encoding_format="float")
    got = np.array([item.embedding for item in answer.data], dtype=np.float32)

    v2 = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    tensor = httpclient.InferInput("TEXT", [len(texts)], "BYTES")
    tensor.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
    raw = v2.infer("pipeline", [tensor]).as_numpy("VECTOR")
    assert raw is not None
    np.testing.assert_allclose(got, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-6)
    assert answer.usage.prompt_tokens == 4 + 1  # counted from the TOKENS mask
    # openai.max_inputs = "3" was read as the number 3.
    with pytest.raises(openai.BadRequestError, match="at most 3"):
        client.embeddings.create(model="pipeline", input=["a"] * 4)


def read(root: Path) -> object:
    return read_pbtxt(
        root / "pipeline" / "config.pbtxt",
        "pipeline",
        backend=None,
        no_backend=lambda: RepositoryError("no backend"),
    )


def test_a_parameter_naming_no_output_fails_at_load(tmp_path: Path) -> None:
    root = write_ensemble(tmp_path, PARAMETERS.replace('"VECTOR"', '"VECTR"'))
    with pytest.raises(RepositoryError, match=r"openai\.output = 'VECTR' is not one of"):
        read(root)


def test_an_unknown_openai_parameter_fails_at_load(tmp_path: Path) -> None:
    extra = 'parameters { key: "openai.normalise" value: { string_value: "true" } }\n'
    with pytest.raises(RepositoryError, match="unknown key 'normalise'"):
        read(write_ensemble(tmp_path, PARAMETERS + extra))


def test_a_flag_that_is_not_true_or_false_fails_at_load(tmp_path: Path) -> None:
    root = write_ensemble(tmp_path, PARAMETERS.replace('"true"', '"yes"'))
    with pytest.raises(RepositoryError, match=r"openai\.normalize must be true or false"):
        read(root)
