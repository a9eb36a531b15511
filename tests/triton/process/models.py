"""A Triton Python model on process instances, asked for in its config.pbtxt.

``execute`` answers with the worker's pid and instance name after some GIL-bound work, and
calls ``add_sub`` (a thread-instance model of the same server) through BLS for its sum (and
checks that ``exec(decoupled=True)``, which a worker cannot do, raises saying so), and
``tell`` with BLS request parameters, answering what ``tell`` was given;
``finalize`` appends the worker's pid to finalized.log.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.triton.models import ADD_SUB, ADD_SUB_CONFIG, INIT_ARGS, INIT_ARGS_PBTXT

WHO_AM_I = """
import json
import os
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]
        self.folder = Path(args["model_repository"]) / args["model_version"]

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            total = 0
            for i in range(200_000):  # pure Python: holds the GIL
                total += i
            call = pb_utils.InferenceRequest(
                model_name="add_sub",
                inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", x)],
                requested_output_names=["OUTPUT0"],
            )
            answer = call.exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=answer.error()))
                continue
            # What the worker's engine link cannot carry raises naming itself.
            try:
                call.exec(decoupled=True)
            except pb_utils.TritonModelException as exc:
                assert "from a process instance" in str(exc), exc
            else:
                raise AssertionError("exec(decoupled=True) worked on a process instance")
            doubled = pb_utils.get_output_tensor_by_name(answer, "OUTPUT0").as_numpy()
            told = pb_utils.InferenceRequest(
                model_name="tell",
                inputs=[pb_utils.Tensor("X", x)],
                requested_output_names=["PARAMETERS"],
                parameters={"asked_by": self.name},
            ).exec()
            if told.has_error():
                raise told.error()
            parameters = pb_utils.get_output_tensor_by_name(told, "PARAMETERS").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("PID", np.array([os.getpid()], np.int64)),
                        pb_utils.Tensor("INSTANCE", np.array([self.name.encode()], np.object_)),
                        pb_utils.Tensor("DOUBLED", doubled),
                        pb_utils.Tensor("TOLD", parameters),
                    ]
                )
            )
        return responses

    def finalize(self):
        with open(self.folder / "finalized.log", "a") as log:
            log.write(f"{os.getpid()} {self.name}\\n")
"""

WHO_AM_I_PBTXT = """
backend: "python"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [
  { name: "PID", data_type: TYPE_INT64, dims: [ 1 ] },
  { name: "INSTANCE", data_type: TYPE_STRING, dims: [ 1 ] },
  { name: "DOUBLED", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "TOLD", data_type: TYPE_STRING, dims: [ 1 ] }
]
instance_group [ { count: 2, kind: KIND_CPU } ]
parameters { key: "instance_kind" value: { string_value: "process" } }
"""


# A thread-instance model that answers with the parameters of the request it was given.
TELL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("PARAMETERS", np.array([r.parameters()], np.object_))]
            )
            for r in requests
        ]
"""

TELL_PBTXT = """
backend: "python"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "PARAMETERS", data_type: TYPE_STRING, dims: [ 1 ] } ]
"""


def build_repository(path: Path) -> Path:
    """``who_am_i`` (2 process instances, config.pbtxt), ``add_sub`` and ``tell`` (thread
    instances) and Triton's ``init_args`` on a process instance."""
    folder = path / "who_am_i" / "1"
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(textwrap.dedent(WHO_AM_I))
    (path / "who_am_i" / "config.pbtxt").write_text(textwrap.dedent(WHO_AM_I_PBTXT))
    add_sub = path / "add_sub" / "1"
    add_sub.mkdir(parents=True)
    (add_sub / "model.py").write_text(textwrap.dedent(ADD_SUB))
    (path / "add_sub" / "config.toml").write_text(
        textwrap.dedent(ADD_SUB_CONFIG.format(instances=1))
    )
    tell = path / "tell" / "1"
    tell.mkdir(parents=True)
    (tell / "model.py").write_text(textwrap.dedent(TELL))
    (path / "tell" / "config.pbtxt").write_text(textwrap.dedent(TELL_PBTXT))
    init_args = path / "init_args" / "1"
    init_args.mkdir(parents=True)
    (init_args / "model.py").write_text(textwrap.dedent(INIT_ARGS))
    (path / "init_args" / "config.pbtxt").write_text(
        textwrap.dedent(INIT_ARGS_PBTXT)
        + 'parameters { key: "instance_kind" value: { string_value: "process" } }\n'
    )
    return path
