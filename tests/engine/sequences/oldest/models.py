"""Accumulator models under the oldest strategy, whose executions say how many rows they ran.

- ``oldest_triton`` (config.pbtxt + TritonPythonModel): INPUT INT32 [1] -> OUTPUT INT32 [1],
  the sum of the sequence so far, kept by the model per correlation id, and ROWS INT32 [1]:
  how many requests the execution that answered it held. One instance, max_batch_size 4,
  eight candidate sequences and a short wait for a fuller batch. It checks every row's
  CORRID and START against the request they belong to.
- ``oldest_state`` (config.toml, a batched ``infer(inputs)``): the same sum kept by the
  server as implicit state (STATE_IN -> STATE_OUT per row), START as a control input, and
  ROWS the rows of the execution. A wrong row's state gives a wrong sum.
"""

from __future__ import annotations

from pathlib import Path

from tests.models import RepoBuilder

TRITON_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        rows = len(requests)
        seen = set()
        responses = []
        for request in requests:
            key = request.correlation_id()
            if key in seen:
                raise ValueError(f"two requests of sequence {key} in one execution")
            seen.add(key)
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy().ravel()[0]
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().ravel()[0]
            if corrid != key or bool(start) != bool(request.flags() & 1):
                raise ValueError(f"row of sequence {key} has CORRID {corrid} START {start}")
            if start:
                self.sums[key] = 0
            self.sums[key] += int(value.ravel()[0])
            out = np.full(value.shape, self.sums[key], dtype=np.int32)
            if request.flags() & 2:
                del self.sums[key]
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT", out),
                        pb_utils.Tensor("ROWS", np.full(value.shape, rows, dtype=np.int32)),
                    ]
                )
            )
        return responses
"""

TRITON_CONFIG = """
backend: "python"
max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [
  { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "ROWS" data_type: TYPE_INT32 dims: [ 1 ] }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
sequence_batching {
  max_sequence_idle_microseconds: 10000000
  oldest { max_candidate_sequences: 8 max_queue_delay_microseconds: 20000 }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
}
"""

STATE_MODEL = """
import numpy as np


class Model:
    def infer(self, inputs):
        start = inputs["START"].reshape(-1, 1) != 0
        total = np.where(start, 0, inputs["STATE_IN"]) + inputs["INPUT"]
        rows = np.full_like(total, total.shape[0])
        return {"OUTPUT": total, "STATE_OUT": total, "ROWS": rows}
"""

STATE_CONFIG = """
backend = "python"
max_batch_size = 4
instances = 1

[sequence_batching]
max_sequence_idle_us = 10000000

[sequence_batching.oldest]
max_candidate_sequences = 8
max_queue_delay_us = 20000

[sequence_batching.controls]
start = "START"

[[sequence_batching.states]]
input = "STATE_IN"
output = "STATE_OUT"
datatype = "INT32"
shape = [1]

[[inputs]]
name = "INPUT"
datatype = "INT32"
shape = [1]

[[outputs]]
name = "OUTPUT"
datatype = "INT32"
shape = [1]

[[outputs]]
name = "ROWS"
datatype = "INT32"
shape = [1]
"""

MODELS = ("oldest_triton", "oldest_state")


def build_repository(path: Path) -> Path:
    builder = RepoBuilder(path)
    folder = path / "oldest_triton"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(TRITON_MODEL)
    (folder / "config.pbtxt").write_text(TRITON_CONFIG)
    builder.python("oldest_state", STATE_MODEL, STATE_CONFIG)
    return path
