"""Request rescheduling and model control from a model's code, as Triton's
qa/L0_backend_python/request_rescheduling drives them.

- ``request.set_release_flags(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)`` in a model with
  ``sequence_batching { iterative_sequence: true }`` runs the request again: a decoupled
  model sends one response per execution; a model that is not decoupled returns None for
  it and answers in a later execution. The request comes without a sequence id: it gets
  one and ``flags()`` says START, then 0 on each later execution (Triton's iterative
  sequencer). A response returned for a rescheduled request fails the batch in Triton's
  words; a model without ``iterative_sequence`` cannot reschedule (Triton's words).
- ``pb_utils.load_model`` / ``unload_model`` / ``is_model_ready`` act on the server's
  models with ``--model-control explicit``, and raise the server's refusal without it.

A real server and tritonclient over gRPC.
"""

from __future__ import annotations

import queue
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer, run_server

# Sends N-1, N-2, ..., 0 for IN = N, one per execution, rescheduling until the last; each
# response carries the execution's flags() and correlation_id().
ITERATIVE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.left = {}

    def execute(self, requests):
        for request in requests:
            key = request.correlation_id()
            if key not in self.left:
                self.left[key] = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            self.left[key] -= 1
            out = [
                pb_utils.Tensor("OUT", np.array([self.left[key]], np.int32)),
                pb_utils.Tensor("FLAGS", np.array([request.flags()], np.int32)),
                pb_utils.Tensor("ID", np.array([key], np.int64)),
            ]
            sender = request.get_response_sender()
            if self.left[key] <= 0:
                sender.send(
                    pb_utils.InferenceResponse(out),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
            else:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                sender.send(pb_utils.InferenceResponse(out))
        return None
"""

# Not decoupled: reschedules each request on its first execution (flags() START) and
# answers it on the next; OUT = how many executions the request had. RETURN_ANYWAY: the
# model also returns a response for the rescheduled request (Triton refuses that).
ONCE_MORE = """
import numpy as np
import triton_python_backend_utils as pb_utils

RETURN_ANYWAY = {return_anyway}


class TritonPythonModel:
    def initialize(self, args):
        self.runs = {{}}

    def execute(self, requests):
        responses = []
        for request in requests:
            key = request.correlation_id()
            self.runs[key] = self.runs.get(key, 0) + 1
            response = pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", np.array([self.runs[key]], np.int32))]
            )
            if request.flags() & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(response if RETURN_ANYWAY else None)
            else:
                responses.append(response)
        return responses
"""

# Not an iterative sequence model: rescheduling is refused.
PLAIN = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
        return [None for _ in requests]
"""

# Model control from a model: OUT holds what each step gave ("True"/"False" for
# is_model_ready, "ok" for a load or unload, or the TritonModelException's message).
CONTROLLER = """
import numpy as np
import triton_python_backend_utils as pb_utils


def _try(call, *args):
    try:
        result = call(*args)
    except pb_utils.TritonModelException as exc:
        return "error: " + str(exc)
    return "ok" if result is None else str(result)


class TritonPythonModel:
    def execute(self, requests):
        steps = [
            _try(pb_utils.is_model_ready, "plain"),
            _try(pb_utils.unload_model, "plain"),
            _try(pb_utils.is_model_ready, "plain"),
            _try(pb_utils.load_model, "plain"),
            _try(pb_utils.is_model_ready, "plain", "1"),
            _try(pb_utils.is_model_ready, "nowhere"),
        ]
        out = pb_utils.Tensor("OUT", np.array([s.encode() for s in steps], np.object_))
        return [pb_utils.InferenceResponse([out]) for _ in requests]
"""

ITERATIVE_SEQUENCE = "sequence_batching { iterative_sequence: true }\n"


def _config(
    name: str, outputs: dict[str, str], *, decoupled: bool = False, iterative: bool = True
) -> str:
    tensors = ", ".join(
        f'{{ name: "{n}", data_type: {t}, dims: [ {"-1" if t == "TYPE_STRING" else "1"} ] }}'
        for n, t in outputs.items()
    )
    text = textwrap.dedent(
        f"""\
        name: "{name}"
        backend: "python"
        max_batch_size: 0
        input [ {{ name: "IN", data_type: TYPE_INT32, dims: [ 1 ] }} ]
        output [ {tensors} ]
        """
    )
    if decoupled:
        text += "model_transaction_policy { decoupled: true }\n"
    return text + (ITERATIVE_SEQUENCE if iterative else "")


MODELS = {
    "iterative": (
        ITERATIVE,
        _config(
            "iterative",
            {"OUT": "TYPE_INT32", "FLAGS": "TYPE_INT32", "ID": "TYPE_INT64"},
            decoupled=True,
        ),
    ),
    # The same as an ``async def execute``: a rescheduled request runs again once the
    # coroutine that rescheduled it is done.
    "iterative_async": (
        ITERATIVE.replace("    def execute(", "    async def execute("),
        _config(
            "iterative_async",
            {"OUT": "TYPE_INT32", "FLAGS": "TYPE_INT32", "ID": "TYPE_INT64"},
            decoupled=True,
        ),
    ),
    "once_more": (
        ONCE_MORE.format(return_anyway=False),
        _config("once_more", {"OUT": "TYPE_INT32"}),
    ),
    "wrong_return": (
        ONCE_MORE.format(return_anyway=True),
        _config("wrong_return", {"OUT": "TYPE_INT32"}),
    ),
    "plain": (PLAIN, _config("plain", {"OUT": "TYPE_INT32"}, iterative=False)),
    "controller": (CONTROLLER, _config("controller", {"OUT": "TYPE_STRING"}, iterative=False)),
}


def _repository(root: Path) -> Path:
    for name, (source, config) in MODELS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(source)
        (root / name / "config.pbtxt").write_text(config)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = _repository(tmp_path_factory.mktemp("rescheduling"))
    loads = [arg for name in MODELS for arg in ("--load-model", name)]
    with run_server(root, extra_args=["--model-control", "explicit", *loads]) as running:
        yield running


def _client(server: RunningServer) -> grpcclient.InferenceServerClient:
    return grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))


def _in(value: int) -> list[grpcclient.InferInput]:
    tensor = grpcclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([value], np.int32))
    return [tensor]


@pytest.mark.parametrize("model", ["iterative", "iterative_async"])
def test_a_decoupled_model_runs_a_rescheduled_request_again(
    server: RunningServer, model: str
) -> None:
    answers: queue.Queue[Any] = queue.Queue()
    with _client(server) as client:
        client.start_stream(lambda result, error: answers.put(error or result))
        client.async_stream_infer(model, _in(3))  # no sequence id, as Triton's test
        client.stop_stream()
    got = [answers.get_nowait() for _ in range(answers.qsize())]
    assert not [a for a in got if isinstance(a, Exception)], got
    assert [int(a.as_numpy("OUT")[0]) for a in got] == [2, 1, 0]
    # START on the first execution, 0 after (neither start nor end), as Triton sets them.
    assert [int(a.as_numpy("FLAGS")[0]) for a in got] == [1, 0, 0]
    (sequence_id,) = {int(a.as_numpy("ID")[0]) for a in got}
    assert sequence_id != 0  # given one, as Triton's iterative sequencer does


def test_a_model_that_is_not_decoupled_answers_in_a_later_execution(
    server: RunningServer,
) -> None:
    with _client(server) as client:
        result = client.infer("once_more", _in(0))
    assert int(result.as_numpy("OUT")[0]) == 2  # rescheduled once, answered the second time


def test_a_response_for_a_rescheduled_request_fails_in_tritons_words(
    server: RunningServer,
) -> None:
    with _client(server) as client, pytest.raises(InferenceServerException) as failed:
        client.infer("wrong_return", _in(0))
    assert (
        "Expected a None object in the execute function return list for reschduled request"
        in failed.value.message()
    )


def test_a_model_without_iterative_sequence_cannot_reschedule(server: RunningServer) -> None:
    with _client(server) as client, pytest.raises(InferenceServerException) as failed:
        client.infer("plain", _in(0))
    assert failed.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert failed.value.message().startswith(
        "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model "
        "is not configured to handle such a flag."
    )


def _controller_steps(server: RunningServer) -> list[str]:
    with _client(server) as client:
        result = client.infer("controller", _in(0))
    return [step.decode() for step in result.as_numpy("OUT")]


def test_a_model_unloads_loads_and_checks_another_model(server: RunningServer) -> None:
    ready, unloaded, after_unload, loaded, after_load, unknown = _controller_steps(server)
    assert (ready, unloaded, loaded, after_load) == ("True", "ok", "ok", "True")
    # Not served: Triton's words for a model it does not hold, raised.
    assert after_unload.startswith("error: Request for unknown model: 'plain'"), after_unload
    assert unknown.startswith("error: Request for unknown model: 'nowhere'"), unknown
    with _client(server) as client:
        assert client.is_model_ready("plain")  # loaded again by the model


def test_model_control_from_a_model_needs_explicit_model_control(tmp_path: Path) -> None:
    with run_server(_repository(tmp_path)) as running:
        ready, unloaded, after_unload, loaded, after_load, _ = _controller_steps(running)
    assert ready == after_unload == after_load == "True"
    assert unloaded.startswith("error: model control is disabled"), unloaded
    assert loaded.startswith("error: model control is disabled"), loaded
