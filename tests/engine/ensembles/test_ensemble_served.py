"""Ensembles served by a real server, driven by tritonclient over HTTP and gRPC."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

from tests.engine.ensembles.models import STEP_MODELS

ENSEMBLES = ("ensemble_pbtxt", "ensemble_toml")


@pytest.fixture(params=("http", "grpc"))
def client(request: pytest.FixtureRequest, ensemble_http_client: Any, ensemble_grpc_client: Any):
    return ensemble_http_client if request.param == "http" else ensemble_grpc_client


def _module(client: Any) -> Any:
    return httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient


def infer(client: Any, model: str, arrays: dict[str, np.ndarray]) -> Any:
    module = _module(client)
    inputs = []
    for name, array in arrays.items():
        tensor = module.InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return client.infer(model, inputs)


def success_counts(client: Any, models: tuple[str, ...]) -> dict[str, int]:
    counts = {}
    for model in models:
        stats = client.get_inference_statistics(model)
        if isinstance(client, httpclient.InferenceServerClient):
            stats = json_format.ParseDict(stats, service_pb2.ModelStatisticsResponse())
        counts[model] = sum(s.inference_stats.success.count for s in stats.model_stats)
    return counts


def pipeline_inputs(delay: float = 0.3) -> dict[str, np.ndarray]:
    raw = np.random.default_rng(7).standard_normal((2, 16)).astype(np.float32)
    return {"RAW": raw, "DELAY": np.array([delay], np.float32)}


@pytest.mark.parametrize("ensemble", ENSEMBLES)
def test_the_pipeline_answers_through_every_step(client: Any, ensemble: str) -> None:
    inputs = pipeline_inputs()
    result = infer(client, ensemble, inputs)
    np.testing.assert_allclose(result.as_numpy("RESULT"), inputs["RAW"] * 2 + 1 - 3, rtol=1e-6)
    response = result.get_response()
    name = response["model_name"] if isinstance(response, dict) else response.model_name
    assert name == ensemble


@pytest.mark.parametrize("ensemble", ENSEMBLES)
def test_independent_steps_overlap(client: Any, ensemble: str) -> None:
    result = infer(client, ensemble, pipeline_inputs(delay=0.3))
    (start_a, end_a), (start_b, end_b) = result.as_numpy("SPAN_A"), result.as_numpy("SPAN_B")
    # Each sleep model has one instance: only running both at once makes the spans overlap.
    assert max(start_a, start_b) < min(end_a, end_b), (start_a, end_a, start_b, end_b)


@pytest.mark.parametrize("ensemble", ENSEMBLES)
def test_every_step_and_the_ensemble_are_counted(client: Any, ensemble: str) -> None:
    models = (*STEP_MODELS, ensemble)
    before = success_counts(client, models)
    infer(client, ensemble, pipeline_inputs(delay=0.01))
    after = success_counts(client, models)
    assert {m: after[m] - before[m] for m in models} == dict.fromkeys(models, 1)


def test_a_failing_step_fails_the_request_naming_it(client: Any) -> None:
    raw = np.ones((1, 16), np.float32)
    with pytest.raises(InferenceServerException) as caught:
        infer(client, "failing_pipeline", {"RAW": raw})
    message = caught.value.message()
    assert "ensemble 'failing_pipeline' step 1 (model 'broken_step') failed" in message
    assert "broken_step refuses every tensor" in message


def test_a_wrong_input_is_refused_with_the_ensemble_named(client: Any) -> None:
    with pytest.raises(InferenceServerException, match="'ensemble_toml' has no input 'NOPE'"):
        infer(client, "ensemble_toml", {"NOPE": np.ones((1, 16), np.float32)})


@pytest.mark.parametrize("ensemble", ENSEMBLES)
def test_config_and_metadata_report_the_ensemble(client: Any, ensemble: str) -> None:
    if isinstance(client, httpclient.InferenceServerClient):
        config = json_format.ParseDict(client.get_model_config(ensemble), mc.ModelConfig())
        metadata = json_format.ParseDict(
            client.get_model_metadata(ensemble), service_pb2.ModelMetadataResponse()
        )
    else:
        config = client.get_model_config(ensemble).config
        metadata = client.get_model_metadata(ensemble)
    assert config.platform == metadata.platform == "ensemble"
    steps = {s.model_name: s for s in config.ensemble_scheduling.step}
    assert set(steps) == set(STEP_MODELS)
    assert dict(steps["tiny"].input_map) == {"INPUT0": "doubled"}
    assert dict(steps["tiny"].output_map) == {"OUTPUT0": "plus_one"}
    assert steps["tiny"].model_version == -1
    assert [i.name for i in metadata.inputs] == ["RAW", "DELAY"]
    assert [o.name for o in metadata.outputs] == ["RESULT", "SPAN_A", "SPAN_B"]
    assert client.is_model_ready(ensemble)


def test_classification_through_an_ensemble_carries_the_step_models_labels(client: Any) -> None:
    # Triton's ensemble_image_client asks preprocess_inception_ensemble for class_count and
    # prints each answer's label: the ensemble's output has no label file, its classifier's
    # does, and Triton answers score:index:label with the classifier's labels.
    module = _module(client)
    image = np.array([[0.1, 0.4, 0.3, 0.2]], np.float32)
    tensor = module.InferInput("IMAGE", [1, 4], "FP32")
    tensor.set_data_from_numpy(image)
    if module is httpclient:
        wanted = module.InferRequestedOutput("CLASSES", binary_data=True, class_count=2)
    else:
        wanted = module.InferRequestedOutput("CLASSES", class_count=2)
    result = client.infer("labelled_ensemble", [tensor], outputs=[wanted])
    assert result.as_numpy("CLASSES").tolist() == [[b"0.800000:1:dog", b"0.600000:2:bird"]]
    # The ensemble's config is reported as written: the labels are the step model's.
    config = client.get_model_config("labelled_ensemble")
    output = config["output"][0] if isinstance(config, dict) else config.config.output[0]
    label_filename = (
        output.get("label_filename", "") if isinstance(output, dict) else output.label_filename
    )
    assert label_filename == ""
