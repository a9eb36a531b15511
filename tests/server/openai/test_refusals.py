"""Refusals that happen before the embeddings route runs, or because its model failed to
load, still reach OpenAI's clients as OpenAI's error objects."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import openai
import pytest

from conveyor.testing import RunningServer, run_server
from tests.server.openai.toy import write_repository

TOKEN = "s3cret"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = write_repository(tmp_path_factory.mktemp("repo"))
    # A model whose [openai] table names an output it does not have: it fails to load.
    broken = root / "broken"
    (broken / "1").mkdir(parents=True)
    (broken / "1" / "model.py").write_text((root / "toy" / "1" / "model.py").read_text())
    config = (root / "toy" / "config.toml").read_text()
    (broken / "config.toml").write_text(config.replace('output = "EMBEDDING"', 'output = "VEC"'))
    with run_server(root, extra_args=["--auth-token", TOKEN, "--no-strict-readiness"]) as running:
        yield running


def client(server: RunningServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.http_url}/v1", api_key=key, max_retries=0)


def test_a_wrong_key_is_openais_401(server: RunningServer) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        client(server, "wrong").embeddings.create(model="toy", input="text")
    assert caught.value.status_code == 401
    assert caught.value.code == "invalid_api_key"
    assert caught.value.type == "invalid_request_error"
    assert "bearer token" in caught.value.message
    # The right key is served.
    answer = client(server, TOKEN).embeddings.create(model="toy", input="text")
    assert len(answer.data[0].embedding) == 8


def test_no_key_on_the_models_list_is_openais_401_with_the_challenge(
    server: RunningServer,
) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{server.http_url}/v1/models", timeout=10)
    assert caught.value.code == 401
    assert caught.value.headers["www-authenticate"].startswith("Bearer")
    error = json.loads(caught.value.read())["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_api_key"
    assert error["param"] is None and "Authorization: Bearer" in error["message"]


def test_a_v2_route_keeps_its_own_401(server: RunningServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{server.http_url}/v2/models/toy", timeout=10)
    assert caught.value.code == 401
    assert isinstance(json.loads(caught.value.read())["error"], str)  # V2's shape


def test_a_model_that_failed_to_load_says_why(server: RunningServer) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client(server, TOKEN).embeddings.create(model="broken", input="text")
    assert caught.value.code == "model_not_found" and caught.value.param == "model"
    # The load's reason, not "has no [openai] table".
    assert "'VEC'" in caught.value.message and "[openai] table" not in caught.value.message
