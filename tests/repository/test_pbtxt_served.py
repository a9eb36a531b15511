"""config.pbtxt models served by a real server, as tritonclient sees them over HTTP and gRPC.

Both protocols give the same answers: the HTTP JSON is parsed into tritonclient's own
messages (which also proves it has Triton's shape), so every assertion reads one message.
"""

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

from conveyor.testing import RunningServer

PROTOCOLS = ("http", "grpc")


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(protocol: str, http_client: Any, grpc_client: Any) -> Any:
    return http_client if protocol == "http" else grpc_client


def config_of(client: Any, model: str) -> mc.ModelConfig:
    if isinstance(client, httpclient.InferenceServerClient):
        # Unknown fields fail the parse: the JSON must be Triton's model config shape.
        return json_format.ParseDict(client.get_model_config(model), mc.ModelConfig())
    return client.get_model_config(model).config


def metadata_of(client: Any, model: str, version: str = "") -> service_pb2.ModelMetadataResponse:
    if isinstance(client, httpclient.InferenceServerClient):
        data = client.get_model_metadata(model, version)
        return json_format.ParseDict(data, service_pb2.ModelMetadataResponse())
    return client.get_model_metadata(model, version)


def infer(client: Any, model: str, arrays: dict[str, np.ndarray], version: str = "", **kw: Any):
    module = httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient
    inputs = []
    for name, array in arrays.items():
        datatype = (
            "BYTES"
            if array.dtype == object
            else {"float32": "FP32", "int32": "INT32"}[str(array.dtype)]
        )
        tensor = module.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return client.infer(model, inputs, model_version=version, **kw)


def test_onnx_config_shows_the_pbtxt_values(client: Any) -> None:
    config = config_of(client, "onnx_pbtxt")
    assert config.name == "onnx_pbtxt"
    assert config.platform == "onnxruntime_onnx"
    assert config.max_batch_size == 8
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [
        ("INPUT0", mc.TYPE_FP32, [16])
    ]
    assert [(o.name, o.data_type, list(o.dims)) for o in config.output] == [
        ("OUTPUT0", mc.TYPE_FP32, [16])
    ]
    groups = [(g.name, g.kind, g.count) for g in config.instance_group]
    assert groups == [
        ("onnx_pbtxt_0", mc.ModelInstanceGroup.KIND_CPU, 1),
        ("extra", mc.ModelInstanceGroup.KIND_MODEL, 2),
    ]
    batching = config.dynamic_batching
    assert list(batching.preferred_batch_size) == [4]
    assert batching.max_queue_delay_microseconds == 100
    assert (batching.priority_levels, batching.default_priority_level) == (3, 2)
    policy = batching.default_queue_policy
    assert policy.max_queue_size == 16
    assert policy.default_timeout_microseconds == 5_000_000
    assert policy.allow_timeout_override
    assert config.version_policy.latest.num_versions == 2
    assert config.parameters["intra_op_threads"].string_value == "1"
    # A parameter onnxruntime does not read is reported as given (Triton's map is free-form).
    assert config.parameters["execute_delay_ms"].string_value == "0"
    assert [w.name for w in config.model_warmup] == ["zeros"]


def test_onnx_inputs_and_outputs_are_completed_from_the_file(client: Any) -> None:
    config = config_of(client, "onnx_auto")
    assert config.max_batch_size == 8
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [
        ("INPUT0", mc.TYPE_FP32, [16])
    ]
    assert [(o.name, o.data_type, list(o.dims)) for o in config.output] == [
        ("OUTPUT0", mc.TYPE_FP32, [16])
    ]
    assert config.version_policy.WhichOneof("policy_choice") == "all"
    meta = metadata_of(client, "onnx_auto")
    assert list(meta.versions) == ["1", "2"]
    assert [(i.name, i.datatype, list(i.shape)) for i in meta.inputs] == [
        ("INPUT0", "FP32", [-1, 16])
    ]


def test_python_config_shows_reshape_labels_and_strings(client: Any) -> None:
    config = config_of(client, "py_pbtxt")
    assert config.backend == "python"
    assert list(config.input[0].reshape.shape) == [2, 2]
    out, text = config.output
    assert list(out.reshape.shape) == [2, 2]
    assert (text.data_type, text.label_filename) == (mc.TYPE_STRING, "labels.txt")
    assert list(config.version_policy.specific.versions) == [1, 3]
    # KIND_AUTO on a machine without a GPU completes to KIND_CPU, as in Triton.
    assert [(g.kind, g.count) for g in config.instance_group] == [
        (mc.ModelInstanceGroup.KIND_CPU, 1)
    ]
    assert config.parameters["greeting"].string_value == "hello"


@pytest.mark.parametrize(
    ("model", "served", "not_served"),
    [
        ("onnx_pbtxt", ["2", "3"], "1"),
        ("onnx_auto", ["1", "2"], None),
        ("py_pbtxt", ["1", "3"], "2"),
    ],
)
def test_the_version_policy_decides_the_versions_served(
    client: Any, model: str, served: list[str], not_served: str | None
) -> None:
    assert list(metadata_of(client, model).versions) == served
    for version in served:
        assert client.is_model_ready(model, version)
    if not_served is not None:
        assert not client.is_model_ready(model, not_served)


def test_onnx_inference_on_each_served_version(client: Any) -> None:
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    for version in ("2", "3"):
        result = infer(client, "onnx_pbtxt", {"INPUT0": x}, version, priority=1)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x + 1)
    with pytest.raises(InferenceServerException):
        infer(client, "onnx_pbtxt", {"INPUT0": x}, "1")


def test_python_inference_reshapes_and_answers_per_version(client: Any) -> None:
    x = np.arange(8, dtype=np.int32).reshape(2, 4)
    for version in ("1", "3"):
        result = infer(client, "py_pbtxt", {"IN": x}, version)
        np.testing.assert_array_equal(result.as_numpy("OUT"), x * 2)
        assert result.as_numpy("TEXT").ravel().tolist() == [f"v{version}".encode()] * 2


def test_warmup_ran_before_the_model_was_ready(triton_server: RunningServer, triton_repository):
    # The server answered ready only after loading; by then every warmup sample had run:
    # "random" (batch 3) once, then "from_file" (batch 1) twice, on each served version.
    for version in ("1", "3"):
        log = (triton_repository / "py_pbtxt" / version / "warmup.log").read_text().split()
        assert log[:3] == ["3", "1", "1"], log


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ("gpu_group", ["instance_group[0].kind", "KIND_GPU", "--gpu-instances-on-cpu"]),
        ("sequence", ["sequence_batching.control_input", "not supported with iterative_sequence"]),
        ("both_files", ["both_files/config.toml", "both_files/config.pbtxt"]),
        ("broken", ["broken/config.pbtxt line 4 column 37", "TYPE_FLOAT32"]),
        ("ensemble_model", ["ensemble_scheduling", 'platform "ensemble" needs', "lists no step"]),
        ("bad_threads", ["onnxruntime.intra_op_threads must be an integer", "'many'"]),
    ],
)
def test_a_refused_config_fails_its_model_with_the_reason(
    client: Any, model: str, words: list[str]
) -> None:
    assert not client.is_model_ready(model)
    with pytest.raises(InferenceServerException) as caught:
        client.get_model_config(model)
    message = caught.value.message()
    assert f"model {model!r}" in message
    for word in words:
        assert word in message, message


def test_a_warned_field_is_logged_once_by_name(triton_server: RunningServer) -> None:
    output = triton_server.output()
    warned = "model 'onnx_pbtxt': config.pbtxt field optimization has no effect in Conveyor"
    assert output.count(warned) == 1, output[-3000:]


def test_a_parameter_the_backend_does_not_read_is_logged_once_by_name(
    triton_server: RunningServer,
) -> None:
    # onnx_pbtxt carries execute_delay_ms and serves (test_onnx_inference_on_each_served_version).
    output = triton_server.output()
    warned = (
        "model 'onnx_pbtxt': config.pbtxt parameters key 'execute_delay_ms' is not read by the "
        "onnxruntime backend"
    )
    assert output.count(warned) == 1, output[-3000:]
