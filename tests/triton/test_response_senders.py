"""Response senders as Triton's qa/L0_backend_python/response_sender drives them: responses
sent before execute returns, with its return, and after it from a thread or an asyncio
task, by decoupled models and by models that are not decoupled.

A real server and tritonclient's gRPC stream, as in Triton's test.
"""

from __future__ import annotations

import queue
import textwrap
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from conveyor.testing import RunningServer, run_server

# BEFORE responses before execute returns, RETURN: one returned, AFTER: sent 0.2 s after
# execute returned (from a thread, or an asyncio task in the async model), then the final
# flag. A response's OUT says when it was sent: 1000+i before, 0 returned, 2000+i after.
COMMON = """
import asyncio
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _value(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().sum())


def _response(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([[value]], np.int32))])


def _send_after(sender, count):
    for index in range(count):
        sender.send(_response(2000 + index))
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)


def plan(requests, later):
    returned = []
    for request in requests:
        sender = request.get_response_sender()
        before, after = _value(request, "BEFORE"), _value(request, "AFTER")
        for index in range(before):
            sender.send(_response(1000 + index))
        if _value(request, "RETURN"):
            returned.append(_response(0))
        else:
            returned.append(None)
            later(sender, after)
    return returned
"""

THREADED = (
    COMMON
    + """

class TritonPythonModel:
    def execute(self, requests):
        def later(sender, count):
            def run():
                time.sleep(0.2)  # after execute returned and its request was let go
                _send_after(sender, count)

            threading.Thread(target=run, daemon=True).start()

        returned = plan(requests, later)
        return None if all(r is None for r in returned) else returned
"""
)

ASYNC = (
    COMMON
    + """

class TritonPythonModel:
    def initialize(self, args):
        self.tasks = set()

    async def execute(self, requests):
        def later(sender, count):
            async def run():
                await asyncio.sleep(0.2)  # after execute returned
                _send_after(sender, count)

            task = asyncio.create_task(run())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

        returned = plan(requests, later)
        return None if all(r is None for r in returned) else returned
"""
)

# Sends its response with the final flag, then tries once more; OUT says what the second
# send raised (1: Triton's words).
AFTER_FINAL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            first = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([7], np.int32))])
            sender.send(first, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            try:
                sender.send(first)
            except Exception as exc:
                words = "Unable to send response. Response sender has been closed."
                pb_utils.Logger.log_info(f"second send: {str(exc) == words}: {exc}")
        return None
"""


def _config(decoupled: bool, batching: bool = False) -> str:
    inputs = ",\n".join(
        f'  {{ name: "{name}", data_type: TYPE_INT32, dims: [ 1 ] }}'
        for name in ("BEFORE", "RETURN", "AFTER")
    )
    text = f"""
        backend: "python"
        max_batch_size: 8
        input [
        {inputs}
        ]
        output [ {{ name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] }} ]
        """
    text = textwrap.dedent(text)
    if decoupled:
        text += "model_transaction_policy { decoupled: true }\n"
    if batching:
        text += "dynamic_batching { max_queue_delay_microseconds: 300000 }\n"
    return text


MODELS = {
    "threaded": (THREADED, _config(False)),
    "threaded_batching": (THREADED, _config(False, batching=True)),
    "threaded_decoupled": (THREADED, _config(True)),
    "async": (ASYNC, _config(False)),
    "async_decoupled": (ASYNC, _config(True)),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("senders")
    for name, (source, config) in MODELS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(source)
        (root / name / "config.pbtxt").write_text(f'name: "{name}"\n' + config)
    (root / "after_final" / "1").mkdir(parents=True)
    (root / "after_final" / "1" / "model.py").write_text(AFTER_FINAL)
    (root / "after_final" / "config.pbtxt").write_text(
        'name: "after_final"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
        'output [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
        "model_transaction_policy { decoupled: true }\n"
    )
    with run_server(root) as running:
        yield running


def _inputs(before: int, returned: int, after: int) -> list[grpcclient.InferInput]:
    inputs = []
    for name, value in (("BEFORE", before), ("RETURN", returned), ("AFTER", after)):
        tensor = grpcclient.InferInput(name, [1, 1], "INT32")
        tensor.set_data_from_numpy(np.array([[value]], np.int32))
        inputs.append(tensor)
    return inputs


def _stream(
    server: RunningServer, model: str, requests: list[list[grpcclient.InferInput]]
) -> list[Any]:
    """Every response or error of ``requests`` sent on one stream; stop_stream waits for
    the server to end every request (it hung here when a request was never ended)."""
    answers: queue.Queue[Any] = queue.Queue()
    url = server.grpc_url.removeprefix("grpc://")
    with grpcclient.InferenceServerClient(url) as client:
        client.start_stream(lambda result, error: answers.put(error or result))
        for inputs in requests:
            client.async_stream_infer(model, inputs)
        client.stop_stream()
    return [answers.get_nowait() for _ in range(answers.qsize())]


def _values(answers: list[Any]) -> list[int]:
    for answer in answers:
        assert not isinstance(answer, Exception), getattr(answer, "message", str)()
    return sorted(int(answer.as_numpy("OUT").sum()) for answer in answers)


@pytest.mark.parametrize("model", ["threaded_decoupled", "async_decoupled"])
@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (0, 0, []),
        (0, 2, [2000, 2001]),
        (1, 3, [1000, 2000, 2001, 2002]),
        (2, 0, [1000, 1001]),
    ],
)
def test_a_decoupled_model_sends_before_and_after_execute_returns(
    server: RunningServer, model: str, before: int, after: int, expected: list[int]
):
    # The async model's task outlives its execute: it ran on a loop asyncio.run closed.
    answers = _stream(server, model, [_inputs(before, 0, after)])
    assert _values(answers) == expected


@pytest.mark.parametrize("model", ["threaded", "async"])
@pytest.mark.parametrize(
    ("before", "returned", "after", "expected"),
    [
        (0, 1, 0, [0]),  # returned from execute
        (1, 0, 0, [1000]),  # sent before execute returned; the final flag follows later
        (0, 0, 1, [2000]),  # sent from a thread / task after execute returned
    ],
)
def test_a_model_that_is_not_decoupled_answers_through_its_sender(
    server: RunningServer, model: str, before: int, returned: int, after: int, expected: list[int]
):
    assert _values(_stream(server, model, [_inputs(before, returned, after)])) == expected


def test_requests_of_one_batch_answer_each_their_own_way(server: RunningServer):
    requests = [_inputs(0, 1, 0), _inputs(1, 0, 0), _inputs(0, 0, 1)]
    assert _values(_stream(server, "threaded_batching", requests)) == [0, 1000, 2000]


def test_a_model_that_is_not_decoupled_keeps_tritons_sender_rules(server: RunningServer):
    # Two responses before returning: the second send raises in execute, and the request
    # keeps the first, as Triton's frontend does.
    assert _values(_stream(server, "threaded", [_inputs(2, 0, 0)])) == [1000]
    # The final flag with no response before it fails the request with Triton's words.
    (answer,) = _stream(server, "threaded", [_inputs(0, 0, 0)])
    assert isinstance(answer, Exception)
    assert "cannot send complete final before sending a response" in answer.message()


def test_a_send_after_the_final_flag_raises_tritons_words(server: RunningServer):
    inputs = grpcclient.InferInput("IN", [1], "INT32")
    inputs.set_data_from_numpy(np.array([1], np.int32))
    assert _values(_stream(server, "after_final", [[inputs]])) == [7]
    assert "second send: True" in server.output()
