"""The OpenVINO backend in-process: IR and ONNX, datatypes, concurrency, errors, options."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnxruntime as ort
import openvino as ov
import pytest
from onnx import TensorProto

from conveyor import Engine, as_completed
from conveyor.backends.openvino import OpenVinoBackend
from conveyor.errors import InvalidInput, RepositoryError
from conveyor.examples import onnx_models
from conveyor.repository.config import parse_config
from tests.backends.openvino_models import openvino_model, write_ir

TYPES = {
    "BOOL": TensorProto.BOOL,
    "UINT8": TensorProto.UINT8,
    "UINT16": TensorProto.UINT16,
    "UINT32": TensorProto.UINT32,
    "UINT64": TensorProto.UINT64,
    "INT8": TensorProto.INT8,
    "INT16": TensorProto.INT16,
    "INT32": TensorProto.INT32,
    "INT64": TensorProto.INT64,
    "FP16": TensorProto.FLOAT16,
    "FP32": TensorProto.FLOAT,
    "FP64": TensorProto.DOUBLE,
    "BF16": TensorProto.BFLOAT16,
    "BYTES": TensorProto.STRING,
}


def sample(datatype: str) -> np.ndarray:
    if datatype == "BYTES":
        return np.array([b"a", b"\xff\x00z", b"", "é".encode()], dtype=object)
    if datatype == "BF16":
        return np.array([0.5, 3.0, -1e30, 1.0078125], dtype=ml_dtypes.bfloat16)
    if datatype == "BOOL":
        return np.array([True, False, True, True])
    if datatype == "FP64":
        return np.array([1e300, 1 / 3, -2.5, 7.0])
    dtype = np.dtype(datatype.lower().replace("fp", "float").replace("uint", "uint"))
    return (np.arange(4) * 7 % 100).astype(dtype)


def mlp_reference(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"INPUT0": x})[0]


@pytest.mark.parametrize("ir", [True, False], ids=["ir", "onnx"])
def test_mlp_matches_onnxruntime(tmp_path, ir):
    source = onnx_models.mlp(tmp_path / "ref.onnx")
    openvino_model(tmp_path / "repo", "mlp", onnx_models.mlp, "max_batch_size = 8\n", ir=ir)
    x = np.random.default_rng(0).standard_normal((3, 256)).astype(np.float32)
    with Engine.from_repository(tmp_path / "repo") as engine:
        out = engine.submit("mlp", {"INPUT0": x}).result(timeout=30)
        info = engine.model("mlp")
    np.testing.assert_allclose(out["OUTPUT0"], mlp_reference(source, x), rtol=1e-4, atol=1e-4)
    assert info.platform == "openvino"


def test_ir_is_found_without_a_config(tmp_path):
    write_ir(tmp_path / "tiny" / "1", onnx_models.tiny)
    with Engine.from_repository(tmp_path) as engine:
        assert engine.model("tiny").platform == "openvino"
        x = np.ones((1, 16), np.float32)
        assert engine.submit("tiny", {"INPUT0": x}).result(timeout=30)["OUTPUT0"].shape[-1] > 0


@pytest.mark.parametrize("datatype", list(TYPES))
def test_every_datatype_round_trips(tmp_path, datatype):
    openvino_model(tmp_path, "echo", lambda p: onnx_models.identity(p, TYPES[datatype]))
    x = sample(datatype)
    with Engine.from_repository(tmp_path) as engine:
        inputs = engine.model("echo").config.inputs
        out = engine.submit("echo", {"INPUT0": x}).result(timeout=30)["OUTPUT0"]
    assert inputs[0].datatype == datatype
    assert out.dtype == x.dtype
    if datatype == "BF16":
        assert out.view(np.uint16).tolist() == x.view(np.uint16).tolist()
    else:
        assert out.tolist() == x.tolist()


def test_many_requests_in_flight_complete_with_their_own_results(tmp_path):
    openvino_model(
        tmp_path,
        "mlp",
        onnx_models.mlp,
        "max_batch_size = 4\ninstances = 2\n[openvino]\ninfer_requests = 3\n",
    )
    source = onnx_models.mlp(tmp_path / "ref.onnx")
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((1, 256)).astype(np.float32) for _ in range(64)]
    with Engine.from_repository(tmp_path) as engine:
        futures = {engine.submit("mlp", {"INPUT0": x}): i for i, x in enumerate(inputs)}
        seen = set()
        for future in as_completed(list(futures), timeout=60):
            i = futures[future]
            np.testing.assert_allclose(
                future.result()["OUTPUT0"], mlp_reference(source, inputs[i]), rtol=1e-4, atol=1e-4
            )
            seen.add(i)
        stats = engine.statistics("mlp")[0]
    assert seen == set(range(64))
    assert stats.inference_count == 64


def test_in_flight_is_the_queue_size(tmp_path):
    version = tmp_path / "m" / "1"
    write_ir(version, onnx_models.tiny)
    backend = OpenVinoBackend()
    configured = backend.load(
        parse_config("m", {"backend": "openvino", "openvino": {"infer_requests": 3}}), version
    )
    assert configured.max_in_flight == len(configured.queue) == 3
    default = backend.load(parse_config("m", {"backend": "openvino"}), version)
    assert default.max_in_flight == default.compiled.get_property(
        "OPTIMAL_NUMBER_OF_INFER_REQUESTS"
    )
    configured.close()
    default.close()


def test_options_reach_the_compiled_model(tmp_path):
    version = tmp_path / "m" / "1"
    write_ir(version, onnx_models.tiny)
    options = {"performance_hint": "THROUGHPUT", "num_streams": 2, "inference_num_threads": 2}
    model = OpenVinoBackend().load(
        parse_config("m", {"backend": "openvino", "openvino": options}), version
    )
    assert str(model.compiled.get_property("PERFORMANCE_HINT")) == "THROUGHPUT"
    assert int(model.compiled.get_property("NUM_STREAMS")) == 2
    assert model.compiled.get_property("INFERENCE_NUM_THREADS") == 2
    model.close()


def test_fewer_streams_than_asked_is_said_in_the_log(tmp_path, caplog):
    asked = 4 * len(os.sched_getaffinity(0))  # more streams than this process has cores
    version = tmp_path / "m" / "1"
    write_ir(version, onnx_models.tiny)
    with caplog.at_level(logging.WARNING, logger="conveyor.backends.openvino"):
        model = OpenVinoBackend().load(
            parse_config("m", {"backend": "openvino", "openvino": {"num_streams": asked}}),
            version,
        )
    got = int(model.compiled.get_property("NUM_STREAMS"))
    model.close()
    if got >= asked:
        pytest.skip(f"this OpenVINO compiled all {asked} streams asked for")
    assert f"num_streams = {asked} asked, OpenVINO compiled {got}" in caplog.text


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"performance_hint": "FAST"}, "openvino.performance_hint must be one of LATENCY"),
        ({"num_streams": 0}, 'openvino.num_streams must be an integer >= 1, "AUTO"'),
        ({"inference_num_threads": -1}, "openvino.inference_num_threads must be an integer >= 0"),
        ({"precision_hint": "f8"}, "openvino.precision_hint must be one of f32"),
        ({"infer_requests": 0}, "openvino.infer_requests must be an integer >= 1"),
        ({"streams": 2}, "unknown key 'streams' in [openvino]"),
    ],
)
def test_bad_options_are_refused_by_name(tmp_path, options, words):
    version = tmp_path / "m" / "1"
    write_ir(version, onnx_models.tiny)
    with pytest.raises(RepositoryError, match=None) as caught:
        OpenVinoBackend().load(
            parse_config("m", {"backend": "openvino", "openvino": options}), version
        )
    assert words in caught.value.message


def test_missing_weights_and_missing_files_are_load_errors(tmp_path):
    version = tmp_path / "m" / "1"
    write_ir(version, onnx_models.tiny)
    (version / "model.bin").unlink()
    config = parse_config("m", {"backend": "openvino"})
    with pytest.raises(RepositoryError) as caught:
        OpenVinoBackend().load(config, version)
    assert "has no model.bin beside it" in caught.value.message
    (version / "model.xml").unlink()
    with pytest.raises(RepositoryError) as caught:
        OpenVinoBackend().load(config, version)
    assert "holds no model.xml or model.onnx" in caught.value.message


def test_a_broken_model_file_is_a_load_error(tmp_path):
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "model.onnx").write_bytes(b"not onnx")
    with pytest.raises(RepositoryError) as caught:
        OpenVinoBackend().load(parse_config("m", {"backend": "openvino"}), version)
    assert "OpenVINO could not load model.onnx" in caught.value.message


def test_wrong_shape_and_out_of_range_values_are_invalid_input(tmp_path):
    openvino_model(tmp_path, "mlp", onnx_models.mlp, "max_batch_size = 4\n")
    openvino_model(tmp_path, "i64", lambda p: onnx_models.identity(p, TensorProto.INT64))
    openvino_model(tmp_path, "text", lambda p: onnx_models.identity(p, TensorProto.STRING))
    with Engine.from_repository(tmp_path) as engine:
        with pytest.raises(InvalidInput, match=r"has shape \[1, 5\]; expected \[-1, 256\]"):
            engine.submit("mlp", {"INPUT0": np.ones((1, 5), np.float32)})
        with pytest.raises(InvalidInput, match="computes INT64 as INT32"):
            engine.submit("i64", {"INPUT0": np.array([2**40], np.int64)}).result(timeout=30)
        with pytest.raises(InvalidInput, match="ends with a NUL byte"):
            engine.submit("text", {"INPUT0": np.array([b"a\0"], object)}).result(timeout=30)
        # The model still serves after refusing those.
        x = np.ones((2, 256), np.float32)
        assert engine.submit("mlp", {"INPUT0": x}).result(timeout=30)["OUTPUT0"].shape == (2, 16)


def test_execution_timeout_is_refused(tmp_path):
    version = tmp_path / "m" / "1"
    write_ir(version, onnx_models.tiny)
    config = dataclasses.replace(
        parse_config("m", {"backend": "openvino"}), execution_timeout_s=1.0
    )
    with pytest.raises(RepositoryError, match="execution_timeout_s is not supported"):
        OpenVinoBackend().load(config, version)


def test_ov_version_is_recent():
    assert int(ov.__version__.split(".")[0]) >= 2024


def test_importing_the_backend_keeps_openvino_telemetry_off():
    # `import openvino` would send a usage event over the network from a forked process.
    code = (
        "import conveyor.backends.openvino\n"
        "import openvino.tools.ovc.telemetry_utils as t\n"
        "print(t.tm.__name__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CONVEYOR_OPENVINO_TELEMETRY"}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "openvino.tools.ovc.telemetry_stub"
