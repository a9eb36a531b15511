"""Triton Python-backend models (TritonPythonModel) served unchanged, driven by tritonclient.

Every protocol test runs over HTTP and gRPC; the models are in models.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor import Engine, ModelUnavailable
from conveyor.testing import RunningServer
from tests.models import RepoBuilder
from tests.triton.models import ADD_SUB, ADD_SUB_CONFIG

PROTOCOLS = ("http", "grpc")


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(server: RunningServer, protocol: str) -> Iterator[Any]:
    if protocol == "http":
        url = server.http_url.removeprefix("http://")
        http = httpclient.InferenceServerClient(url, concurrency=4)
        yield http
        http.close()
    else:
        grpc = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
        yield grpc
        grpc.close()


def _lib(protocol: str) -> Any:
    return httpclient if protocol == "http" else grpcclient


def _input(protocol: str, name: str, array: np.ndarray, datatype: str) -> Any:
    tensor = _lib(protocol).InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def _infer(client: Any, protocol: str, model: str, inputs: dict[str, tuple[np.ndarray, str]],
           outputs: list[str] | None = None, **kwargs: Any) -> Any:  # fmt: skip
    requested = [_lib(protocol).InferRequestedOutput(name) for name in outputs] if outputs else None
    return client.infer(
        model,
        [_input(protocol, name, array, datatype) for name, (array, datatype) in inputs.items()],
        outputs=requested,
        **kwargs,
    )


def _add_sub_inputs() -> tuple[np.ndarray, np.ndarray, dict[str, tuple[np.ndarray, str]]]:
    a = np.array([1, 2, 3, 4], dtype=np.float32)
    b = np.array([10, 20, 30, 40], dtype=np.float32)
    return a, b, {"INPUT0": (a, "FP32"), "INPUT1": (b, "FP32")}


def test_add_sub_runs_unchanged(client: Any, protocol: str):
    a, b, inputs = _add_sub_inputs()
    result = _infer(client, protocol, "add_sub", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def test_initialize_gets_tritons_args_and_each_instance_its_own_object(
    server: RunningServer, repository: Path
):
    folder = repository / "add_sub" / "1"
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("args-*.json"))]
    assert [r["model_instance_name"] for r in records] == ["add_sub_0_0", "add_sub_0_1"]
    assert len({r["object_id"] for r in records}) == 2  # one TritonPythonModel per instance
    for record in records:
        assert record["model_name"] == "add_sub"
        assert record["model_version"] == "1"
        assert record["model_instance_kind"] == "CPU"
        assert record["model_instance_device_id"] == "0"
        assert Path(record["model_repository"]) == repository / "add_sub"
        config = json.loads(record["model_config"])
        assert config["name"] == "add_sub"
        assert [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]
        assert config["output"][0] == {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}
        # The same JSON the server answers GET /v2/models/add_sub/config with.
        http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        assert http.get_model_config("add_sub") == config
        http.close()


def test_outputs_keep_the_shape_the_model_gave_them(client: Any, protocol: str):
    # Triton's qa/L0_backend_python test_init_args: IN of shape [2, 2] (two rows under
    # max_batch_size 64), OUT answered with shape [1] although its dims are [-1]; Triton's
    # Python backend sends a tensor's own shape, so the response carries [1], not a 500.
    result = _infer(client, protocol, "init_args", {"IN": (np.zeros((2, 2), np.float32), "FP32")})
    out = result.as_numpy("OUT")
    assert out.shape == (1,)
    assert out.tolist() == [7.0]  # the seven keys of initialize()'s args


def test_outputs_keep_the_datatype_the_model_gave_them(client: Any, protocol: str):
    # The model answers INT64 [2] where its config says TYPE_INT32 [1], as python_backend's
    # examples/bls_decoupled does: Triton passes the tensor on as it is, and so does Conveyor.
    result = _infer(client, protocol, "own_datatype", {"IN": (np.array([1], np.int32), "INT32")})
    out = result.as_numpy("SUM")
    assert out.dtype == np.int64
    assert out.tolist() == [0, 7]
    response = result.get_response()
    datatype = (
        response["outputs"][0]["datatype"] if protocol == "http" else (response.outputs[0].datatype)
    )
    assert datatype == "INT64"


def test_pb_utils_arguments_of_a_wrong_type_raise_what_triton_raises(client: Any, protocol: str):
    # TypeError for an argument of another type (Triton's API is typed through pybind11),
    # TritonModelException with Triton's words for a None tensor in a list.
    result = _infer(client, protocol, "argument_checks", {"IN": (np.array([1], np.int32), "INT32")})
    assert json.loads(result.as_numpy("WRONG")[0]) == []


def test_strings_and_request_accessors(client: Any, protocol: str):
    text = np.array([b"hello", "w\u00f6rld".encode()], dtype=np.object_)
    result = _infer(
        client, protocol, "strings", {"TEXT": (text, "BYTES")}, ["UPPER", "ABOUT"], request_id="r-7"
    )
    assert result.as_numpy("UPPER").tolist() == [b"HELLO", "W\u00d6RLD".encode()]
    about = json.loads(result.as_numpy("ABOUT")[0])
    assert about == {
        "model_name": "strings",
        "request_id": "r-7",
        "outputs": ["UPPER", "ABOUT"],
        "parameters": {},
        "inputs": ["TEXT"],
    }


# WHAT -> (HTTP status, gRPC status, words in the message), as Triton answers each code.
# Each TritonError code answered as Triton answers it: gRPC by its GrpcStatusUtil::
# CodeToStatus (one to one), HTTP by its HttpCodeFromError (src/grpc/grpc_utils.cc and
# src/http_server.cc of triton-inference-server/server).
ERROR_CASES = {
    1: ("400", "StatusCode.INVALID_ARGUMENT", "refused request 1"),
    2: ("400", "StatusCode.ALREADY_EXISTS", "refused request 2"),
    3: ("404", "StatusCode.NOT_FOUND", "refused request 3"),
    4: ("503", "StatusCode.UNAVAILABLE", "refused request 4"),
    7: ("501", "StatusCode.UNIMPLEMENTED", "refused request 7"),
    9: ("400", "StatusCode.UNKNOWN", "refused request 9"),
    10: ("400", "StatusCode.CANCELLED", "refused request 10"),
    11: ("500", "StatusCode.INTERNAL", "refused request 11"),
    20: ("400", "StatusCode.UNKNOWN", "raised for request 20"),
    21: ("500", "StatusCode.INTERNAL", "raised for request 21"),
    22: ("404", "StatusCode.NOT_FOUND", "raised for request 22"),
    23: ("400", "StatusCode.INVALID_ARGUMENT", "raised for request 23"),
    24: ("503", "StatusCode.UNAVAILABLE", "raised for request 24"),
    25: ("501", "StatusCode.UNIMPLEMENTED", "raised for request 25"),
    26: ("400", "StatusCode.ALREADY_EXISTS", "raised for request 26"),
    27: ("400", "StatusCode.CANCELLED", "raised for request 27"),
    8: ("500", "StatusCode.INTERNAL", "no code given"),
    5: ("500", "StatusCode.INTERNAL", "the whole batch fails"),
    6: ("500", "StatusCode.INTERNAL", "cannot send complete final before sending a response"),
}


@pytest.mark.parametrize("what", list(ERROR_CASES))
def test_a_response_error_fails_its_request_with_its_status(client: Any, protocol: str, what: int):
    http_status, grpc_status, words = ERROR_CASES[what]
    with pytest.raises(InferenceServerException) as caught:
        _infer(client, protocol, "errors", {"WHAT": (np.array([what], dtype=np.int32), "INT32")})
    assert words in caught.value.message()
    assert caught.value.status() == (http_status if protocol == "http" else grpc_status)
    # The model still serves.
    ok = _infer(client, protocol, "errors", {"WHAT": (np.array([0], dtype=np.int32), "INT32")})
    assert ok.as_numpy("OUT").tolist() == [0]


def _statistics(client: Any, protocol: str, model: str) -> dict[str, Any]:
    if protocol == "http":
        return client.get_inference_statistics(model)["model_stats"][0]
    return client.get_inference_statistics(model, as_json=True)["model_stats"][0]


@pytest.mark.parametrize("model", ["bls", "bls_async"])
def test_bls_calls_another_model_through_the_engine(client: Any, protocol: str, model: str):
    a, b, inputs = _add_sub_inputs()
    before = int(_statistics(client, protocol, "add_sub")["inference_count"])
    result = _infer(client, protocol, model, inputs)
    expected = a + b if model == "bls" else a - b
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), expected)
    # The call went through add_sub's queue and statistics.
    assert int(_statistics(client, protocol, "add_sub")["inference_count"]) == before + 1


def test_auto_complete_config_fills_in_the_config(client: Any, protocol: str):
    if protocol == "http":
        config = client.get_model_config("auto_complete")
    else:
        config = client.get_model_config("auto_complete", as_json=True)["config"]
    assert [i["name"] for i in config["input"]] == ["X"]
    assert [o["name"] for o in config["output"]] == ["Y"]
    assert int(config["max_batch_size"]) == 8
    assert "dynamic_batching" in config
    x = np.array([[1, 2], [3, 4]], dtype=np.int64)
    result = _infer(client, protocol, "auto_complete", {"X": (x, "INT64")})
    assert result.as_numpy("Y").tolist() == [[2, 4], [6, 8]]


def test_dynamic_batching_hands_several_requests_to_one_execute(client: Any, protocol: str):
    def one(value: float) -> Any:
        x = np.array([[value]], dtype=np.float32)
        return _infer(client, protocol, "batch_count", {"X": (x, "FP32")})

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, [1.0, 2.0, 3.0, 4.0]))
    for value, result in zip([1.0, 2.0, 3.0, 4.0], results, strict=True):
        assert result.as_numpy("Y").tolist() == [[value + 1]]  # each its own request
    counts = [int(result.as_numpy("COUNT")[0, 0]) for result in results]
    assert max(counts) > 1, counts


def test_finalize_runs_on_unload(server: RunningServer, repository: Path):
    http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        http.unload_model("lifecycle")
    finally:
        http.close()
    log = repository / "lifecycle" / "1" / "finalized.log"
    ids = set(log.read_text().split())
    created = {
        str(json.loads(p.read_text())["object_id"])
        for p in (repository / "lifecycle" / "1").glob("args-*.json")
    }
    assert ids == created and len(ids) == 2


# -- in-process: what the load itself does -------------------------------------------------


def test_pb_utils_alias_is_gone_after_load_and_decoupled_process_instances_say_thread_only(
    tmp_path: Path,
):
    # Process instances serve Triton models now (tests/triton/process); a decoupled one
    # still runs on threads only, and its load says so.
    builder = RepoBuilder(tmp_path / "models")
    builder.python("add_sub", ADD_SUB, ADD_SUB_CONFIG.format(instances=1))
    builder.python(
        "in_process", ADD_SUB, 'instance_kind = "process"\n' + ADD_SUB_CONFIG.format(instances=1)
    )
    builder.python(
        "decoupled_process",
        ADD_SUB,
        'instance_kind = "process"\ndecoupled = true\n' + ADD_SUB_CONFIG.format(instances=1),
    )
    with Engine.from_repository(builder.path) as engine:
        assert "triton_python_backend_utils" not in sys.modules
        a = np.ones(4, np.float32)
        out = engine.submit("add_sub", {"INPUT0": a, "INPUT1": a}).result(timeout=30)
        assert out["OUTPUT0"].tolist() == [2, 2, 2, 2]
        out = engine.submit("in_process", {"INPUT0": a, "INPUT1": a}).result(timeout=30)
        assert out["OUTPUT1"].tolist() == [0, 0, 0, 0]
        with pytest.raises(ModelUnavailable, match="runs on thread instances only"):
            engine.submit("decoupled_process", {"INPUT0": a, "INPUT1": a})


def test_exec_outside_a_model_says_no_server_is_reachable():
    # In a fresh process: one that has served a model keeps its caller for the threads a
    # model starts itself.
    code = (
        "from conveyor.triton import pb_utils\n"
        "request = pb_utils.InferenceRequest(model_name='x', inputs=[], "
        "requested_output_names=[])\n"
        "try:\n"
        "    request.exec()\n"
        "except pb_utils.TritonModelException as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "initialize() or execute()" in done.stdout, done.stderr
    from conveyor.triton import pb_utils

    assert pb_utils.numpy_to_triton_type(np.float32) == 11
    assert pb_utils.triton_to_numpy_type(13) is np.object_
