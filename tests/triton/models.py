"""Triton-style Python models, written as Triton's python_backend documents them.

Each is a ``model.py`` that imports ``triton_python_backend_utils`` and defines
``TritonPythonModel``; configs are config.toml (the model's own code is what is under test).
"""

from __future__ import annotations

from pathlib import Path

from tests.models import RepoBuilder

# Triton's add_sub example, plus what lets a test see the lifecycle: initialize writes its
# args (and which object it is) to a file, finalize appends to finalized.log.
ADD_SUB = """
import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = model_config = json.loads(args["model_config"])
        output0 = pb_utils.get_output_config_by_name(model_config, "OUTPUT0")
        output1 = pb_utils.get_output_config_by_name(model_config, "OUTPUT1")
        self.output0_dtype = pb_utils.triton_string_to_numpy(output0["data_type"])
        self.output1_dtype = pb_utils.triton_string_to_numpy(output1["data_type"])
        folder = Path(args["model_repository"]) / args["model_version"]
        self.folder = folder
        record = dict(args, object_id=id(self))
        (folder / f"args-{args['model_instance_name']}.json").write_text(json.dumps(record))
        pb_utils.Logger.log_info(f"initialized {args['model_instance_name']}")

    def execute(self, requests):
        responses = []
        for request in requests:
            in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out_0 = pb_utils.Tensor("OUTPUT0", (in_0 + in_1).astype(self.output0_dtype))
            out_1 = pb_utils.Tensor("OUTPUT1", (in_0 - in_1).astype(self.output1_dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out_0, out_1]))
        return responses

    def finalize(self):
        with open(self.folder / "finalized.log", "a") as log:
            log.write(f"{id(self)}\\n")
"""

ADD_SUB_CONFIG = """
backend = "python"
instances = {instances}

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [4]

[[inputs]]
name = "INPUT1"
datatype = "FP32"
shape = [4]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [4]

[[outputs]]
name = "OUTPUT1"
datatype = "FP32"
shape = [4]
"""

# BYTES in and out: each string upper-cased, and the request's own details echoed back.
STRINGS = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            upper = np.array([t.decode().upper().encode() for t in text.ravel()], dtype=object)
            about = json.dumps({
                "model_name": request.model_name(),
                "request_id": request.request_id(),
                "outputs": request.requested_output_names(),
                "parameters": json.loads(request.parameters()),
                "inputs": [t.name() for t in request.inputs()],
            })
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("UPPER", upper.reshape(text.shape)),
                pb_utils.Tensor("ABOUT", np.array([about.encode()], dtype=np.object_)),
            ]))
        return responses
"""

STRINGS_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "TEXT"
datatype = "BYTES"
shape = [-1]

[[outputs]]
name = "UPPER"
datatype = "BYTES"
shape = [-1]

[[outputs]]
name = "ABOUT"
datatype = "BYTES"
shape = [1]
"""

# What each request asks for: 0 succeeds, 1-4 are a per-request TritonError of some code,
# 5 raises (failing the whole batch), 6 asks for a decoupled response sender.
ERRORS = """
import numpy as np
import triton_python_backend_utils as pb_utils

CODES = {
    1: pb_utils.TritonError.INVALID_ARG,
    2: pb_utils.TritonError.ALREADY_EXISTS,
    3: pb_utils.TritonError.NOT_FOUND,
    4: pb_utils.TritonError.UNAVAILABLE,
    7: pb_utils.TritonError.UNSUPPORTED,
    9: pb_utils.TritonError.UNKNOWN,
    10: pb_utils.TritonError.CANCELLED,
    11: pb_utils.TritonError.INTERNAL,
}
# 20 + code: raised from execute rather than returned, for each of Triton's eight codes.
RAISED = {20 + code: code for code in range(8)}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            what = int(pb_utils.get_input_tensor_by_name(request, "WHAT").as_numpy().ravel()[0])
            if what == 5:
                raise pb_utils.TritonModelException("the whole batch fails")
            if what in RAISED:
                raise pb_utils.TritonError(f"raised for request {what}", RAISED[what])
            if what == 6:  # Triton's rule for a model that is not decoupled
                request.get_response_sender().send(
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
            if what == 8:
                error = pb_utils.TritonError("no code given")
            elif what in CODES:
                error = pb_utils.TritonError(f"refused request {what}", CODES[what])
            else:
                error = None
            out = pb_utils.Tensor("OUT", np.array([what], dtype=np.int32))
            responses.append(pb_utils.InferenceResponse([out] if error is None else [], error))
        return responses
"""

ERRORS_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "WHAT"
datatype = "INT32"
shape = [1]

[[outputs]]
name = "OUT"
datatype = "INT32"
shape = [1]
"""

# Business Logic Scripting: add_sub through the engine; also a model that does not exist.
BLS = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="add_sub",
                inputs=[request.inputs()[0], pb_utils.get_input_tensor_by_name(request, "INPUT1")],
                requested_output_names=["OUTPUT0"],
            )
            answer = call.exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            missing = pb_utils.InferenceRequest(
                model_name="no_such_model", inputs=[], requested_output_names=["X"]
            ).exec()
            assert missing.has_error() and "no_such_model" in missing.error().message()
            assert missing.error().code() == pb_utils.TritonError.NOT_FOUND
            total = pb_utils.get_output_tensor_by_name(answer, "OUTPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", total)]))
        return responses
"""

# The same through ``async def execute`` and ``async_exec``.
BLS_ASYNC = """
import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        calls = [
            pb_utils.InferenceRequest(
                model_name="add_sub",
                inputs=request.inputs(),
                requested_output_names=["OUTPUT1"],
            ).async_exec()
            for request in requests
        ]
        answers = await asyncio.gather(*calls)
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", a.output_tensors()[0].as_numpy())]
            )
            for a in answers
        ]
"""

BLS_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [4]

[[inputs]]
name = "INPUT1"
datatype = "FP32"
shape = [4]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [4]
"""

# No inputs or outputs in its config: auto_complete_config adds them, with batching.
AUTO_COMPLETE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "X", "data_type": "TYPE_INT64", "dims": [2]})
        auto_complete_model_config.add_output({"name": "Y", "data_type": "TYPE_INT64", "dims": [2]})
        auto_complete_model_config.set_max_batch_size(8)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)
            ])
            for r in requests
        ]
"""

AUTO_COMPLETE_CONFIG = 'backend = "python"\n'

# Dynamic batching: each request is answered with how many requests its execute() got.
BATCH_COUNT = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        count = len(requests)
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", x + 1),
                pb_utils.Tensor("COUNT", np.full((x.shape[0], 1), count, dtype=np.int32)),
            ]))
        return responses
"""

BATCH_COUNT_CONFIG = """
backend = "python"
instances = 1
max_batch_size = 8

[dynamic_batching]
max_queue_delay_us = 2000000
preferred_batch_sizes = [4]

[[inputs]]
name = "X"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "Y"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "COUNT"
datatype = "INT32"
shape = [1]
"""

# Triton's own qa/python_models/init_args, with its config.pbtxt: execute() answers every
# request with shape [1] while the output's dims are [-1] under max_batch_size 64 (a request
# of two rows gets one row back). Triton serves it; so does Conveyor.
INIT_ARGS = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = args

    def execute(self, requests):
        keys = [
            "model_config",
            "model_instance_kind",
            "model_instance_name",
            "model_instance_device_id",
            "model_repository",
            "model_version",
            "model_name",
        ]
        correct_keys = sum(1 for key in keys if key in self.args)
        responses = []
        for _ in requests:
            out_args = pb_utils.Tensor("OUT", np.array([correct_keys], dtype=np.float32))
            responses.append(pb_utils.InferenceResponse([out_args]))
        return responses
"""

INIT_ARGS_PBTXT = """
name: "init_args"
backend: "python"
max_batch_size: 64

input [
  {
    name: "IN"
    data_type: TYPE_FP32
    dims: [ -1 ]
  }
]

output [
  {
    name: "OUT"
    data_type: TYPE_FP32
    dims: [ -1 ]
  }
]

instance_group [
  {
    count: 1
    kind : KIND_CPU
  }
]
"""

# As python_backend's examples/bls_decoupled sync model: its SUM is ``np.array([0])``
# (INT64) where the config says TYPE_INT32. Triton sends a tensor's own datatype (and its
# core checks only that the output is declared), so the client gets INT64.
OWN_DATATYPE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("SUM", np.array([0, 7]))])
            for _ in requests
        ]
"""

OWN_DATATYPE_PBTXT = """
name: "own_datatype"
backend: "python"
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "SUM", data_type: TYPE_INT32, dims: [ 1 ] } ]
"""

# Argument checks as Triton's typed (pybind11) API makes them, after Triton's own
# qa/python_models/argument_validation: the model answers the checks that did not raise
# what Triton raises (none: an empty list).
ARGUMENT_CHECKS = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils

T = pb_utils.Tensor("X", np.zeros(1, np.int32))
CHECKS = [
    (pb_utils.TritonModelException, lambda: pb_utils.InferenceRequest(
        inputs=[None], model_name="m", requested_output_names=["o"])),
    (TypeError, lambda: pb_utils.InferenceRequest(
        inputs=None, model_name="m", requested_output_names=["o"])),
    (TypeError, lambda: pb_utils.InferenceRequest(
        inputs=[T], model_name=None, requested_output_names=["o"])),
    (TypeError, lambda: pb_utils.InferenceRequest(
        inputs=[T], model_name="m", requested_output_names=[None])),
    (TypeError, lambda: pb_utils.InferenceRequest(
        inputs=[T], model_name="m", requested_output_names=["o"], correlation_id=None)),
    (TypeError, lambda: pb_utils.InferenceRequest(
        inputs=[T], model_name="m", requested_output_names=["o"], request_id=None)),
    (TypeError, lambda: pb_utils.InferenceRequest(
        inputs=[T], model_name="m", requested_output_names=["o"], flags=None)),
    (pb_utils.TritonModelException, lambda: pb_utils.InferenceResponse(output_tensors=[None])),
    (TypeError, lambda: pb_utils.InferenceResponse(output_tensors=None)),
    (TypeError, lambda: pb_utils.Tensor(None, np.zeros(1))),
    (TypeError, lambda: pb_utils.Tensor("X", None)),
    (TypeError, lambda: pb_utils.Logger.log("m", None)),
    (TypeError, lambda: pb_utils.Logger.log("m", 1)),
    (TypeError, lambda: pb_utils.Logger.log_info(None)),
    # A response's parameters: str keys, bool/int/str values (not float), as Triton's.
    (pb_utils.TritonModelException, lambda: pb_utils.InferenceResponse(parameters=[])),
    (pb_utils.TritonModelException, lambda: pb_utils.InferenceResponse(parameters={1: "x"})),
    (pb_utils.TritonModelException, lambda: pb_utils.InferenceResponse(parameters={"f": 0.5})),
]
# Triton's words (qa/python_models/response_parameters), which its test compares.
WORDS = [
    ({"f": 0.5}, "Expect parameters values to have type bool/int/str, found type <class 'float'>"),
    ({1: "x"}, "Expect parameters keys to have type str, found type <class 'int'>"),
    ([], ", got <class 'list'>"),
]


class TritonPythonModel:
    def execute(self, requests):
        wrong = []
        for number, (expected, call) in enumerate(CHECKS):
            try:
                call()
                wrong.append(f"{number}: nothing raised")
            except Exception as exc:
                if type(exc) is not expected:
                    wrong.append(f"{number}: {type(exc).__name__}")
        for parameters, words in WORDS:
            try:
                pb_utils.InferenceResponse(parameters=parameters)
            except pb_utils.TritonModelException as exc:
                if words not in str(exc):
                    wrong.append(str(exc))
        pb_utils.Logger.log("levels unspecified are INFO")  # does not raise
        out = np.array([json.dumps(wrong).encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("WRONG", out)]) for _ in requests]
"""

ARGUMENT_CHECKS_PBTXT = """
name: "argument_checks"
backend: "python"
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "WRONG", data_type: TYPE_STRING, dims: [ 1 ] } ]
"""

# Models whose config is Triton's config.pbtxt, as Triton's repository has it.
PBTXT_MODELS = {
    "init_args": (INIT_ARGS, INIT_ARGS_PBTXT),
    "own_datatype": (OWN_DATATYPE, OWN_DATATYPE_PBTXT),
    "argument_checks": (ARGUMENT_CHECKS, ARGUMENT_CHECKS_PBTXT),
}

MODELS = {
    "add_sub": (ADD_SUB, ADD_SUB_CONFIG.format(instances=2)),
    "lifecycle": (ADD_SUB, ADD_SUB_CONFIG.format(instances=2)),
    "strings": (STRINGS, STRINGS_CONFIG),
    "errors": (ERRORS, ERRORS_CONFIG),
    "bls": (BLS, BLS_CONFIG),
    "bls_async": (BLS_ASYNC, BLS_CONFIG),
    "auto_complete": (AUTO_COMPLETE, AUTO_COMPLETE_CONFIG),
    "batch_count": (BATCH_COUNT, BATCH_COUNT_CONFIG),
}


def build_repository(path: Path) -> Path:
    builder = RepoBuilder(path)
    for name, (source, config) in MODELS.items():
        builder.python(name, source, config)
    for name, (source, pbtxt) in PBTXT_MODELS.items():
        folder = builder.python(name, source, "")
        (folder / "config.toml").unlink()
        (folder / "config.pbtxt").write_text(pbtxt)
    return path
