"""Triton Python models for the stateful, decoupled and BLS paths of pb_utils.

- ``running_sum``: stateful (sequence batching, no control inputs): keeps a sum per
  ``request.correlation_id()`` that restarts when ``request.flags()`` has
  ``TRITONSERVER_REQUEST_FLAG_SEQUENCE_START``, and answers [sum, started, ended].
- ``running_sum_decoupled``: the same, decoupled (its answers go out on the response sender).
- ``countdown``: decoupled; checks ``pb_utils.using_decoupled_model_transaction_policy`` at
  load (refusing to load if it is false), as python_backend's decoupled examples do, then
  answers IN[0] responses, IN[0]-1 down to 0, then the final flag alone; for an odd IN[0]
  its last response carries the final flag.
- ``doubler``: OUT = 2 * IN.
- ``bls_by_name``: calls the model named by its BYTES input MODEL (``as_numpy()[0]``, a
  bytes, as python_backend's BLS example passes it) with IN, and answers its OUT.
- ``bls_stream``: ``exec(decoupled=True)`` (or, with ASYNC = 1, ``await
  async_exec(decoupled=True)``) on countdown; answers [sum of the values, responses with
  outputs, empty responses].
"""

from __future__ import annotations

from pathlib import Path

RUNNING_SUM = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        start = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
        end = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END
        responses = []
        for request in requests:
            flags = request.flags()
            key = request.correlation_id()
            if flags & start:
                self.sums[key] = 0
            value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            self.sums[key] += int(value.ravel()[0])
            out = np.array([self.sums[key], bool(flags & start), bool(flags & end)], np.int64)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
            if flags & end:
                del self.sums[key]
        return responses
"""

RUNNING_SUM_PBTXT = """
backend: "python"
max_batch_size: 0
sequence_batching { max_sequence_idle_microseconds: 5000000 }
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 3 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

# RUNNING_SUM as a decoupled model: each request's answer goes out on its response sender.
RUNNING_SUM_DECOUPLED = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        start = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
        end = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END
        for request in requests:
            flags = request.flags()
            key = request.correlation_id()
            if flags & start:
                self.sums[key] = 0
            value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            self.sums[key] += int(value.ravel()[0])
            out = np.array([self.sums[key], bool(flags & start), bool(flags & end)], np.int64)
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            if flags & end:
                del self.sums[key]
        return None
"""

RUNNING_SUM_DECOUPLED_PBTXT = RUNNING_SUM_PBTXT + "model_transaction_policy { decoupled: true }\n"

COUNTDOWN = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException("countdown must be decoupled")

    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().ravel()[0])
            sender = request.get_response_sender()
            final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            for value in reversed(range(count)):
                out = pb_utils.Tensor("OUT", np.array([value], np.int64))
                # An odd count: the last response carries the final flag itself.
                last = value == 0 and count % 2 == 1
                sender.send(pb_utils.InferenceResponse([out]), flags=final if last else 0)
            if count % 2 == 0:
                sender.send(flags=final)
        return None
"""

COUNTDOWN_PBTXT = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

DOUBLER = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", 2 * pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]
            )
            for r in requests
        ]
"""

DOUBLER_PBTXT = """
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
"""

BLS_BY_NAME = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            model = pb_utils.get_input_tensor_by_name(request, "MODEL").as_numpy()[0]
            call = pb_utils.InferenceRequest(
                model_name=model,
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["OUT"],
            )
            answer = call.exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=answer.error()))
                continue
            out = pb_utils.get_output_tensor_by_name(answer, "OUT")
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""

BLS_BY_NAME_PBTXT = """
backend: "python"
max_batch_size: 0
input [
  { name: "MODEL" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] }
]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
"""

BLS_STREAM = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="countdown",
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["OUT"],
            )
            use_async = pb_utils.get_input_tensor_by_name(request, "ASYNC").as_numpy()[0]
            if use_async:
                answers = await call.async_exec(decoupled=True)
            else:
                answers = call.exec(decoupled=True)
            total = full = empty = 0
            for answer in answers:
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                if answer.output_tensors():
                    total += int(pb_utils.get_output_tensor_by_name(answer, "OUT").as_numpy()[0])
                    full += 1
                else:
                    empty += 1
            out = pb_utils.Tensor("OUT", np.array([total, full, empty], np.int64))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""

BLS_STREAM_PBTXT = """
backend: "python"
max_batch_size: 0
input [
  { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] },
  { name: "ASYNC" data_type: TYPE_BOOL dims: [ 1 ] }
]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 3 ] } ]
"""

# Decoupled: sleeps IN[0] ms, then sends OUT = IN with the final flag; with IN[0] < 0 it
# sends the final flag alone and then raises (as qa/python_models/async_execute_decouple).
SLEEPER = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            sender = request.get_response_sender()
            if value[0] < 0:
                sender.send(flags=final)
                raise ValueError("sleeper got a negative time")
            time.sleep(value[0] / 1000)
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", value)]), flags=final)
        return None
"""

SLEEPER_PBTXT = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { count: 4 kind: KIND_CPU } ]
"""

# Decoupled, async execute: ``await async_exec(decoupled=True)`` on sleeper, then reads
# its responses without awaiting (as qa/python_models/async_execute_decouple_bls). OUT: how
# many of its executions were waiting in async_exec when this one's returned (Triton's
# returns after the first response, so the event loop runs the others meanwhile).
BLS_AWAIT_FIRST = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.waiting = 0

    async def _one(self, request):
        call = pb_utils.InferenceRequest(
            model_name="sleeper",
            inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
            requested_output_names=["OUT"],
        )
        self.waiting += 1
        answers = await call.async_exec(decoupled=True)
        seen = self.waiting
        self.waiting -= 1
        for answer in answers:
            pass
        out = pb_utils.Tensor("OUT", np.array([seen], np.int64))
        request.get_response_sender().send(
            pb_utils.InferenceResponse([out]),
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        )

    async def execute(self, requests):
        for request in requests:
            await self._one(request)
        return None
"""

BLS_AWAIT_FIRST_PBTXT = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

# Decoupled: sends 1 every 10 ms until its request is cancelled (then Triton's CANCELLED
# error, final) or, IN[0] = 1 (take no notice of cancelling), 30 responses in all.
UNTIL_CANCELLED = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            ignore = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0] == 1
            sender = request.get_response_sender()
            for sent in range(30):
                if not ignore and request.is_cancelled():
                    error = pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)
                    sender.send(pb_utils.InferenceResponse(error=error), flags=final)
                    break
                one = pb_utils.Tensor("OUT", np.array([1], np.int64))
                sender.send(pb_utils.InferenceResponse([one]), flags=final if sent == 29 else 0)
                time.sleep(0.01)
        return None
"""

# BLS: sums until_cancelled's responses, calling cancel() once the sum reaches 5.
# OUT: [sum, 1 if a CANCELLED error response came].
BLS_CANCEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="until_cancelled",
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["OUT"],
            )
            answers = call.exec(decoupled=True)
            total = cancelled = 0
            for answer in answers:
                if answer.has_error():
                    cancelled = int(answer.error().code() == pb_utils.TritonError.CANCELLED)
                    break
                out = pb_utils.get_output_tensor_by_name(answer, "OUT")
                if out is None:
                    break  # the empty final response
                total += int(out.as_numpy()[0])
                if total == 5:
                    answers.cancel()
            out = pb_utils.Tensor("OUT", np.array([total, cancelled], np.int64))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""

# Decoupled with dynamic batching (as qa/python_models' decoupled_execute_error): one
# execute gets the batch; each request is answered [requests in its execute, its index].
DECOUPLED_BATCH = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for index, request in enumerate(requests):
            out = pb_utils.Tensor("OUT", np.array([len(requests), index], np.int64))
            request.get_response_sender().send(pb_utils.InferenceResponse([out]), flags=final)
        return None
"""

DECOUPLED_BATCH_PBTXT = """
backend: "python"
max_batch_size: 8
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 2 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching { preferred_batch_size: [ 2 ], max_queue_delay_microseconds: 10000000 }
"""

# Decoupled, but execute returns its responses (a mistake Triton names in its words).
RETURNS_RESPONSES = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = pb_utils.Tensor("OUT", np.array([1], np.int64))
        return [pb_utils.InferenceResponse([out]) for _ in requests]
"""

# Decoupled: a thread it starts itself calls countdown (BLS, decoupled) and forwards each
# response (as qa/decoupled's decoupled_bls_stream).
BLS_FROM_THREAD = """
import threading

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            threading.Thread(target=self.forward, args=(sender, tensor), daemon=True).start()
        return None

    def forward(self, sender, tensor):
        call = pb_utils.InferenceRequest(
            model_name="countdown", inputs=[tensor], requested_output_names=["OUT"]
        )
        try:
            for answer in call.exec(decoupled=True):
                if answer.has_error():
                    sender.send(answer)
                elif answer.output_tensors():
                    sender.send(pb_utils.InferenceResponse(answer.output_tensors()))
        except Exception as exc:
            error = pb_utils.TritonError(str(exc))
            sender.send(pb_utils.InferenceResponse(error=error))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

MODELS = {
    "running_sum": (RUNNING_SUM, RUNNING_SUM_PBTXT),
    "running_sum_decoupled": (RUNNING_SUM_DECOUPLED, RUNNING_SUM_DECOUPLED_PBTXT),
    "countdown": (COUNTDOWN, COUNTDOWN_PBTXT),
    "doubler": (DOUBLER, DOUBLER_PBTXT),
    "bls_by_name": (BLS_BY_NAME, BLS_BY_NAME_PBTXT),
    "bls_stream": (BLS_STREAM, BLS_STREAM_PBTXT),
    "sleeper": (SLEEPER, SLEEPER_PBTXT),
    "bls_from_thread": (BLS_FROM_THREAD, COUNTDOWN_PBTXT),
    "returns_responses": (RETURNS_RESPONSES, COUNTDOWN_PBTXT),
    "decoupled_batch": (DECOUPLED_BATCH, DECOUPLED_BATCH_PBTXT),
    "until_cancelled": (UNTIL_CANCELLED, COUNTDOWN_PBTXT),
    "bls_cancel": (BLS_CANCEL, BLS_STREAM_PBTXT.replace("dims: [ 3 ]", "dims: [ 2 ]")),
    "bls_await_first": (BLS_AWAIT_FIRST, BLS_AWAIT_FIRST_PBTXT),
}


def build(root: Path) -> Path:
    for name, (source, pbtxt) in MODELS.items():
        folder = root / name / "1"
        folder.mkdir(parents=True)
        (folder / "model.py").write_text(source)
        (root / name / "config.pbtxt").write_text(pbtxt)
    return root
