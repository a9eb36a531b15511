"""A load that carries a config or files (tritonclient's ``load_model(config=, files=)``),
as Triton's model-repository extension defines it, over both protocols: the config is used
for that load instead of the folder's, files form the model's folder, a later plain load
reads the repository again, and every bad override is a 400 / INVALID_ARGUMENT that leaves
the model served as it was."""

from __future__ import annotations

import base64
import gc
import json
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from conveyor.examples import onnx_models
from conveyor.testing import RunningServer, run_server
from tests.server.compat.triton_util import bad_request_status, client_module

PBTXT = 'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("overrides")
    onnx_models.tiny(root / "tiny" / "1" / "model.onnx")
    (root / "tiny" / "config.pbtxt").write_text(PBTXT)
    args = ["--model-control", "explicit", "--load-model", "tiny", "--no-strict-readiness"]
    with run_server(root, extra_args=args) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"


@pytest.fixture(scope="module", params=["http", "grpc"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def client(server: RunningServer, protocol: str) -> Iterator[Any]:
    module = client_module(protocol)
    port = server.http_port if protocol == "http" else server.grpc_port
    triton = module.InferenceServerClient(f"127.0.0.1:{port}")
    yield triton
    triton.close()
    del triton
    gc.collect()


def max_batch_size(client: Any, protocol: str, model: str) -> int:
    config = client.get_model_config(model)
    return int(config["max_batch_size"] if protocol == "http" else config.config.max_batch_size)


def add_one(client: Any, protocol: str, model: str, rows: int) -> np.ndarray:
    module = client_module(protocol)
    x = np.arange(rows * 16, dtype=np.float32).reshape(rows, 16)
    tensor = module.InferInput("INPUT0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer(model, [tensor]).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(result, x + 1)
    return result


def test_a_config_override_is_used_for_that_load_and_a_plain_load_reads_the_folder_again(
    client: Any, protocol: str
) -> None:
    # Triton's own example sends the number as a string, as proto3 JSON allows.
    client.load_model("tiny", config='{"max_batch_size":"16"}')
    assert max_batch_size(client, protocol, "tiny") == 16
    add_one(client, protocol, "tiny", 12)  # more rows than the folder's config allows
    client.load_model("tiny")
    assert max_batch_size(client, protocol, "tiny") == 8


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ('"parameters": {"config": {{"max_batch_size": "16"}}}', "not a model configuration"),
        ('{"max_batch_size": -1}', "max_batch_size: must be >= 0"),
        ('{"name": "other"}', "does not match the model's folder"),
    ],
    ids=["not-json", "bad-value", "other-name"],
)
def test_a_bad_config_fails_to_load_and_the_model_keeps_serving(
    client: Any, protocol: str, config: str, words: str
) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("tiny", config=config)
    message = caught.value.message()
    assert "failed to load" in message  # what Triton's example clients look for
    assert "the load request's config" in message and words in message
    assert caught.value.status() == bad_request_status(protocol)
    assert client.is_model_ready("tiny")
    add_one(client, protocol, "tiny", 2)


def written_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("conveyor-load-*"))


def test_files_form_the_folder_of_a_model_the_repository_does_not_hold(
    client: Any, protocol: str, tmp_path: Path
) -> None:
    model = f"uploaded_{protocol}"
    onnx_file = onnx_models.tiny(tmp_path / "model.onnx")
    before = written_folders()
    config = json.dumps({"backend": "onnxruntime", "max_batch_size": 4})
    # A leading '/' names the model's folder, as in Triton (its QA writes 'file:/1/model.py').
    client.load_model(model, config=config, files={"file:/1/model.onnx": onnx_file.read_bytes()})
    assert client.is_model_ready(model)
    assert max_batch_size(client, protocol, model) == 4
    add_one(client, protocol, model, 3)
    assert len(written_folders() - before) == 1
    client.unload_model(model)
    assert not client.is_model_ready(model)
    assert written_folders() - before == set()  # the written folder went with the model


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("file:" + "A" * 256, "longer than 255 bytes"),
        ("file:../escape/model.onnx", "'..'"),
        ("file:/../model.onnx", "'..'"),
        ("file:", "names no file"),
    ],
    ids=["long-name", "dot-dot", "rooted-dot-dot", "empty"],
)
def test_a_file_path_outside_the_model_folder_is_refused(
    client: Any, protocol: str, path: str, words: str
) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("tiny", config="{}", files={path: b"a"})
    message = caught.value.message()
    assert message.startswith("failed to load 'tiny', failed to poll from model repository: ")
    assert "Invalid file path" in message and words in message, message
    assert caught.value.status() == bad_request_status(protocol)
    assert client.is_server_live() and client.is_model_ready("tiny")


def test_a_model_name_that_is_a_path_is_refused_before_anything_is_written(
    client: Any, protocol: str
) -> None:
    escaped = Path(tempfile.gettempdir()) / f"escaped_by_load_{protocol}"
    before = written_folders()
    with pytest.raises(InferenceServerException):
        client.load_model(f"../{escaped.name}", config="{}", files={"file:1/model.onnx": b"x"})
    assert not escaped.exists()
    assert written_folders() == before
    assert client.is_server_live()


def test_files_without_a_config_are_refused(client: Any, protocol: str) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("tiny", files={"file:1/model.onnx": b"x"})
    assert "no 'config' parameter" in caught.value.message()
    assert caught.value.status() == bad_request_status(protocol)


def post_load(server: RunningServer, parameters: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        f"{server.http_url}/v2/repository/models/tiny/load",
        data=json.dumps({"parameters": parameters}).encode(),
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())["error"]


def test_http_names_a_file_that_is_not_base64_and_a_config_that_is_not_a_string(
    server: RunningServer,
) -> None:
    status, error = post_load(server, {"config": "{}", "file:1/model.onnx": "not base64!"})
    assert status == 400 and "'file:1/model.onnx' is not valid base64" in error
    status, error = post_load(server, {"config": {"max_batch_size": 16}})
    assert status == 400 and "must be a string holding the model configuration" in error
    good = base64.b64encode(b"not an onnx file").decode()
    status, error = post_load(server, {"config": "{}", "file:1/model.onnx": good})
    assert status == 400 and "failed to load" in error  # the bytes arrived, and are no model


@pytest.mark.parametrize("name", ["model;test", "model|test", "model$test", "model!test"])
def test_a_name_with_shell_characters_is_refused_in_tritons_words_first(
    client: Any, name: str
) -> None:
    # qa/L0_backend_python/model_control looks for Triton's Python-backend words.
    config = json.dumps({"name": name, "backend": "python"})
    with pytest.raises(InferenceServerException) as raised:
        client.load_model(name, config=config)
    message = str(raised.value)
    assert "Invalid stub name: contains invalid characters" in message
    assert f"{name!r} is not a valid model name" in message  # then Conveyor's own
