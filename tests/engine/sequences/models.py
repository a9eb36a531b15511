"""Accumulator sequence models (a running sum per sequence, as Triton's simple_sequence).

- ``accumulate_triton`` (config.pbtxt + TritonPythonModel): INPUT INT32 [1] -> OUTPUT INT32
  [1], the sum of the sequence so far; control inputs START, END, READY and CORRID (UINT64,
  or TYPE_STRING for ``accumulate_triton_str``). Two instances, max_batch_size 4: each keeps
  its own sums, so a request routed to the wrong instance gives a wrong sum. It checks that
  CORRID equals ``request.correlation_id()`` and that START matches the request's flags.
- ``accumulate_native`` (config.toml, ``infer(inputs, sequence)``): the same sum, kept per
  ``sequence.id`` by each of its two instances (not thread-safe: one object each).
- ``one_slot``: the native model with one instance, one slot, one queued sequence at most and
  a short idle timeout (``IDLE_US``), for the idle tests; ``one_slot_patient``: the same with
  a long one, for the slot-limit test.
- ``stateless``: tests.models' echo model, with no sequence batching.
"""

from __future__ import annotations

from pathlib import Path

from tests.models import RepoBuilder

TRITON_MODEL = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()
            end = pb_utils.get_input_tensor_by_name(request, "END").as_numpy()
            ready = pb_utils.get_input_tensor_by_name(request, "READY").as_numpy()
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().ravel()[0]
            if isinstance(corrid, bytes):
                corrid = corrid.decode()
            key = request.correlation_id()
            if corrid != key or ready.ravel()[0] != 1:
                raise ValueError(f"CORRID {corrid!r} != correlation_id {key!r}")
            if bool(start.ravel()[0]) != bool(request.flags() & 1):
                raise ValueError("START does not match the request's flags")
            if start.ravel()[0]:
                self.sums[key] = 0
            self.sums[key] += int(value.ravel()[0])
            total = self.sums[key]
            if end.ravel()[0]:
                del self.sums[key]
            out = np.full(value.shape, total, dtype=np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return responses
"""

TRITON_CONFIG = """
backend: "python"
max_batch_size: 4
input [ {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
instance_group [ {{ count: 2 kind: KIND_CPU }} ]
sequence_batching {{
  max_sequence_idle_microseconds: 5000000
  control_input [
    {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid} }} ] }}
  ]
}}
"""

NATIVE_MODEL = """
import numpy as np


class Model:
    thread_safe = False  # one object per instance: each keeps its own sums

    def load(self, config):
        self.sums = {}

    def infer(self, inputs, sequence):
        if sequence.start:
            self.sums[sequence.id] = 0
        self.sums[sequence.id] += int(inputs["INPUT"].ravel()[0])
        total = self.sums[sequence.id]
        if sequence.end:
            del self.sums[sequence.id]
        return {"OUTPUT": np.array([total], dtype=np.int32)}
"""

NATIVE_CONFIG = """
backend = "python"
instances = {instances}

[sequence_batching]
max_sequence_idle_us = {idle_us}
max_queued_sequences = {queued}

[[inputs]]
name = "INPUT"
datatype = "INT32"
shape = [1]

[[outputs]]
name = "OUTPUT"
datatype = "INT32"
shape = [1]
"""

IDLE_US = 1_000_000


def build_repository(path: Path) -> Path:
    builder = RepoBuilder(path)
    for name, corrid in (
        ("accumulate_triton", "TYPE_UINT64"),
        ("accumulate_triton_str", "TYPE_STRING"),
    ):
        folder = path / name
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "model.py").write_text(TRITON_MODEL)
        (folder / "config.pbtxt").write_text(TRITON_CONFIG.format(corrid=corrid))
    builder.python(
        "accumulate_native",
        NATIVE_MODEL,
        NATIVE_CONFIG.format(instances=2, idle_us=5_000_000, queued=64),
    )
    builder.python(
        "one_slot", NATIVE_MODEL, NATIVE_CONFIG.format(instances=1, idle_us=IDLE_US, queued=1)
    )
    builder.python(
        "one_slot_patient",
        NATIVE_MODEL,
        NATIVE_CONFIG.format(instances=1, idle_us=60_000_000, queued=1),
    )
    builder.echo_model("stateless", "INT32")
    return path
