"""Response parameters (``InferenceResponse(..., parameters=...)``) reach clients as Triton
sends them: HTTP JSON ``"parameters"`` in the response object, gRPC
``ModelInferResponse.parameters`` (bool_param, int64_param, string_param), each streamed
response of a decoupled model (with Triton's ``triton_final_response``), and a BLS caller's
``response.parameters()``.

A real server and tritonclient, as Triton's qa/L0_backend_python/parameters drives them.
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server

# The response's parameters are the JSON object (a list of them, one per response, for the
# decoupled model) given as input P; OUT echoes P.
PLAIN = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "P").as_numpy()[0].decode()
            out = pb_utils.Tensor("OUT", np.array([text.encode()], dtype=np.object_))
            responses.append(
                pb_utils.InferenceResponse([out], parameters=json.loads(text))
            )
        return responses
"""

DECOUPLED = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "P").as_numpy()[0].decode()
            sender = request.get_response_sender()
            for parameters in json.loads(text):
                out = pb_utils.Tensor(
                    "OUT", np.array([json.dumps(parameters).encode()], dtype=np.object_)
                )
                sender.send(pb_utils.InferenceResponse([out], parameters=parameters))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

# Calls both models with BLS; OUT is the JSON list of the parameters its responses carried.
BLS = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _call(model, text, decoupled):
    request = pb_utils.InferenceRequest(
        model_name=model,
        inputs=[pb_utils.Tensor("P", np.array([text.encode()], dtype=np.object_))],
        requested_output_names=["OUT"],
    )
    return request.exec(decoupled=decoupled)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            plain, decoupled = (
                pb_utils.get_input_tensor_by_name(request, name).as_numpy()[0].decode()
                for name in ("PLAIN", "DECOUPLED")
            )
            seen = [json.loads(_call("plain", plain, False).parameters())]
            for response in _call("decoupled", decoupled, True):
                if response.output_tensors():
                    seen.append(json.loads(response.parameters()))
            out = pb_utils.Tensor("OUT", np.array([json.dumps(seen).encode()], np.object_))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""


def _config(name: str, inputs: tuple[str, ...], decoupled: bool = False) -> str:
    tensors = ", ".join(f'{{ name: "{i}", data_type: TYPE_STRING, dims: [ 1 ] }}' for i in inputs)
    text = (
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
        f"input [ {tensors} ]\n"
        'output [ { name: "OUT", data_type: TYPE_STRING, dims: [ 1 ] } ]\n'
    )
    return text + ("model_transaction_policy { decoupled: true }\n" if decoupled else "")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("response-parameters")
    models = {
        "plain": (PLAIN, _config("plain", ("P",))),
        "decoupled": (DECOUPLED, _config("decoupled", ("P",), decoupled=True)),
        "bls": (BLS, _config("bls", ("PLAIN", "DECOUPLED"))),
    }
    for name, (source, config) in models.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(source)
        (root / name / "config.pbtxt").write_text(config)
    with run_server(root) as running:
        yield running


PARAMETERS = {"bool": True, "int": 1024, "negative": -3, "str": "Hello World!", "empty": ""}


def _grpc_values(parameters: Any) -> dict[str, Any]:
    """A protobuf parameter map as {key: (kind, value)}: the kind Triton's tests read."""
    values = {}
    for key, parameter in parameters.items():
        kind = parameter.WhichOneof("parameter_choice")
        values[key] = (kind, getattr(parameter, kind))
    return values


def _grpc_input(name: str, text: str) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, [1], "BYTES")
    tensor.set_data_from_numpy(np.array([text.encode()], dtype=np.object_))
    return tensor


def test_http_response_carries_the_parameters_as_json_values(server: RunningServer) -> None:
    tensor = httpclient.InferInput("P", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([json.dumps(PARAMETERS).encode()], dtype=np.object_))
    with httpclient.InferenceServerClient(server.http_url.removeprefix("http://")) as client:
        result = client.infer("plain", [tensor])
    # JSON true, numbers and strings, as Triton's HTTP front end writes them.
    assert result.get_response()["parameters"] == PARAMETERS


def test_grpc_response_carries_bool_int64_and_string_params(server: RunningServer) -> None:
    with grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://")) as client:
        result = client.infer("plain", [_grpc_input("P", json.dumps(PARAMETERS))])
    assert _grpc_values(result.get_response().parameters) == {
        "bool": ("bool_param", True),
        "int": ("int64_param", 1024),
        "negative": ("int64_param", -3),
        "str": ("string_param", "Hello World!"),
        "empty": ("string_param", ""),
    }


def test_a_response_without_parameters_has_none(server: RunningServer) -> None:
    with grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://")) as client:
        result = client.infer("plain", [_grpc_input("P", "{}")])
    assert dict(result.get_response().parameters) == {}


def test_each_streamed_response_carries_its_own_parameters(server: RunningServer) -> None:
    sent = [{"bool": False, "int": 2048}, {"str": "second"}]
    answers: queue.Queue[Any] = queue.Queue()
    with grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://")) as client:
        client.start_stream(lambda result, error: answers.put(error or result))
        client.async_stream_infer("decoupled", [_grpc_input("P", json.dumps(sent))])
        client.stop_stream()
    got = [answers.get_nowait() for _ in range(answers.qsize())]
    assert len(got) == 2
    # Triton's stream handler adds triton_final_response to every response it writes; the
    # model sent its final flag alone, so it is false on both.
    assert [_grpc_values(r.get_response().parameters) for r in got] == [
        {
            "bool": ("bool_param", False),
            "int": ("int64_param", 2048),
            "triton_final_response": ("bool_param", False),
        },
        {"str": ("string_param", "second"), "triton_final_response": ("bool_param", False)},
    ]


def test_a_streamed_answer_of_a_model_that_is_not_decoupled_is_final(
    server: RunningServer,
) -> None:
    answers: queue.Queue[Any] = queue.Queue()
    with grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://")) as client:
        client.start_stream(lambda result, error: answers.put(error or result))
        client.async_stream_infer("plain", [_grpc_input("P", '{"k": 1}')])
        client.stop_stream()
    (answer,) = [answers.get_nowait() for _ in range(answers.qsize())]
    assert _grpc_values(answer.get_response().parameters) == {
        "k": ("int64_param", 1),
        "triton_final_response": ("bool_param", True),
    }


def test_a_bls_caller_reads_the_parameters_of_each_response(server: RunningServer) -> None:
    plain = {"bool": False, "int": 7, "str": "x"}
    decoupled = [{"a": 1}, {"b": "two"}]
    with grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://")) as client:
        result = client.infer(
            "bls",
            [
                _grpc_input("PLAIN", json.dumps(plain)),
                _grpc_input("DECOUPLED", json.dumps(decoupled)),
            ],
        )
    assert json.loads(result.as_numpy("OUT")[0]) == [plain, *decoupled]
