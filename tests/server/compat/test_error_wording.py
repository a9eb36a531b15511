"""Errors that Triton's clients (and their users' tests) match by text start with Triton's
wording, then say Conveyor's own detail; the status codes are Conveyor's as before.
Over HTTP and gRPC, with tritonclient."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer
from tests.polling import wait_until
from tests.server.compat.models import WHY
from tests.server.compat.triton_util import client_module
from tests.server.shm.shm_util import region


def message_of(call: Callable[[], Any]) -> str:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return str(caught.value.message())


def infer_tiny(client: Any, protocol: str, model: str = "tiny", version: str = "") -> Any:
    module = client_module(protocol)
    x = module.InferInput("INPUT0", [1, 16], "FP32")
    x.set_data_from_numpy(np.zeros((1, 16), np.float32))
    return client.infer(model, [x], model_version=version)


def test_unknown_model(client: Any, protocol: str) -> None:
    for call in (
        lambda: infer_tiny(client, protocol, "nope"),
        lambda: client.get_model_metadata("nope"),
        lambda: client.get_model_config("nope"),
    ):
        message = message_of(call)
        assert message.startswith("Request for unknown model: 'nope' is not found")
        assert "'nope' is not in the repository" in message  # Conveyor's detail stays


def test_unknown_version(client: Any, protocol: str) -> None:
    for call in (
        lambda: infer_tiny(client, protocol, version="7"),
        lambda: client.get_model_metadata("tiny", "7"),
    ):
        message = message_of(call)
        assert message.startswith("Request for unknown model: 'tiny' version 7 is not found")
        assert "has no version 7; loaded versions are 1" in message


def test_malformed_version(client: Any, protocol: str) -> None:
    message = message_of(lambda: client.get_model_metadata("tiny", "one"))
    assert message.startswith("failed to get model version from specified version string 'one'"), (
        message
    )
    assert "version should be an integral value > 0" in message
    assert "model version must be an integer, got 'one'" in message


def test_load_of_a_model_the_repository_does_not_hold(client: Any, protocol: str) -> None:
    message = message_of(lambda: client.load_model("nothing_here"))
    # The text Triton's own lifecycle tests assert on.
    assert message.startswith("failed to load 'nothing_here', failed to poll from model repository")
    assert "'nothing_here' is not in the repository" in message


def test_failed_load_then_requests_for_it(client: Any, protocol: str) -> None:
    message = message_of(lambda: client.load_model("broken"))
    assert message.startswith("load failed for model 'broken'")
    assert "'broken' failed to load" in message and WHY in message
    assert not client.is_model_ready("broken")
    module = client_module(protocol)
    x = module.InferInput("INPUT0", [1, 1], "FP32")
    x.set_data_from_numpy(np.zeros((1, 1), np.float32))
    message = message_of(lambda: client.infer("broken", [x]))
    assert message.startswith("Request for unknown model: 'broken' has no available versions")
    assert "failed to load" in message and WHY in message


# -- requests Triton's own tests refuse by text (qa/L0_input_validation, L0_implicit_state,
# L0_shared_memory, L0_model_queue, L0_batcher): Triton's sentence, then Conveyor's words.


def _tensor(protocol: str, name: str, array: np.ndarray, datatype: str = "FP32") -> Any:
    tensor = client_module(protocol).InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def test_missing_inputs(client: Any, protocol: str) -> None:
    one = [_tensor(protocol, "INPUT0", np.zeros(2, np.float32))]
    message = message_of(lambda: client.infer("pair", one))
    assert message.startswith(
        "expected number of inputs between 2 and 3 but got 1 inputs for model 'pair'. Got "
        "input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all "
        "required input(s)."
    ), message
    assert "missing input 'INPUT1'; it expects INPUT0, INPUT1, OPTIONAL" in message
    message = message_of(lambda: client.infer("tiny", []))
    assert message.startswith(
        "expected 1 inputs but got 0 inputs for model 'tiny'. Got input(s) [], but missing "
        "required input(s) ['INPUT0']. Please provide all required input(s)."
    ), message


def test_unknown_input_and_output(client: Any, protocol: str) -> None:
    x = np.zeros((1, 16), np.float32)
    message = message_of(lambda: client.infer("tiny", [_tensor(protocol, "INPUT9", x)]))
    assert message.startswith("unexpected inference input 'INPUT9' for model 'tiny': "), message
    wanted = [client_module(protocol).InferRequestedOutput("OUTPUT9")]
    message = message_of(
        lambda: client.infer("tiny", [_tensor(protocol, "INPUT0", x)], outputs=wanted)
    )
    assert message.startswith("unexpected inference output 'OUTPUT9' for model 'tiny': "), message
    assert "its outputs are OUTPUT0" in message


def test_datatype_shape_and_batch_size(client: Any, protocol: str) -> None:
    rows = np.zeros((1, 4), np.int32)
    message = message_of(
        lambda: client.infer("scores_batched", [_tensor(protocol, "INPUT0", rows, "INT32")])
    )
    assert message.startswith(
        "inference input 'INPUT0' data-type is 'INT32', but model 'scores_batched' expects 'FP32': "
    ), message
    short = np.zeros((1, 3), np.float32)
    message = message_of(
        lambda: client.infer("scores_batched", [_tensor(protocol, "INPUT0", short)])
    )
    assert message.startswith(
        "unexpected shape for input 'INPUT0' for model 'scores_batched'. Expected [-1,4], got "
        "[1,3]: "
    ), message
    many = np.zeros((9, 4), np.float32)
    message = message_of(
        lambda: client.infer("scores_batched", [_tensor(protocol, "INPUT0", many)])
    )
    assert message.startswith("inference request batch-size must be <= 8 for 'scores_batched': "), (
        message
    )


def test_an_input_or_output_named_twice(client: Any, protocol: str) -> None:
    # L0_http test_duplicate_output_names; Triton refuses either twice over both protocols.
    x = _tensor(protocol, "INPUT0", np.zeros((1, 16), np.float32))
    message = message_of(lambda: client.infer("tiny", [x, x]))
    assert message.startswith("input 'INPUT0' already exists in request: "), message
    wanted = [client_module(protocol).InferRequestedOutput("OUTPUT0") for _ in range(2)]
    message = message_of(lambda: client.infer("tiny", [x], outputs=wanted))
    assert message.startswith("output 'OUTPUT0' already exists in request: "), message


def test_byte_size_that_does_not_fit_the_shape(client: Any, protocol: str) -> None:
    # L0_input_validation: the data of [1, 16] sent under a shape of [1, 15].
    tensor = _tensor(protocol, "INPUT0", np.zeros((1, 16), np.float32))
    tensor.set_shape([1, 15])
    message = message_of(lambda: client.infer("tiny", [tensor]))
    assert message.startswith(
        "input byte size mismatch for input 'INPUT0' for model 'tiny'. Expected 60, got 64: "
    ), message


def test_grpc_contents_beside_raw_input_contents(compat_server: RunningServer) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{compat_server.grpc_port}")
    try:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="pair")
        for name in ("INPUT0", "INPUT1"):
            request.inputs.add(name=name, datatype="FP32", shape=[2])
        request.inputs[0].contents.fp32_contents.extend([1.0, 2.0])
        request.raw_input_contents.append(np.ones(2, np.float32).tobytes())
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(request, timeout=10)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details().startswith(
            "contents field must not be specified when using raw_input_contents for 'INPUT0' "
            "for model 'pair': "
        ), caught.value.details()
        request.inputs[0].ClearField("contents")
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(request, timeout=10)  # two inputs, one raw buffer
        assert caught.value.details().startswith(
            "unable to find data for input tensor 'INPUT1' for model 'pair' in request.: "
        ), caught.value.details()
    finally:
        channel.close()


def test_shared_memory_refusals(client: Any, protocol: str) -> None:
    with region(128, "wording") as (name, key, _):
        client.register_system_shared_memory(name, key, 128)
        try:
            again = message_of(lambda: client.register_system_shared_memory(name, key, 128))
            assert again.startswith(f"shared memory region '{name}' already in manager: "), again
            # L0_shared_memory test_too_big_shm: a 128-byte input for a 64-byte tensor.
            tensor = client_module(protocol).InferInput("INPUT0", [1, 16], "FP32")
            tensor.set_shared_memory(name, 128)
            message = message_of(lambda: client.infer("tiny", [tensor]))
            assert message.startswith(
                "input byte size mismatch for input 'INPUT0' for model 'tiny'. Expected 64, got "
                "128: "
            ), message
            tensor.set_shared_memory(name, 64, offset=96)
            message = message_of(lambda: client.infer("tiny", [tensor]))
            assert message.startswith(
                f"Invalid offset + byte size for shared memory region: '{name}': "
            ), message
            tensor.set_shared_memory(name, 64, offset=128)
            message = message_of(lambda: client.infer("tiny", [tensor]))
            assert message.startswith(f"Invalid offset for shared memory region: '{name}': ")
        finally:
            client.unregister_system_shared_memory(name)
        message = message_of(lambda: client.get_system_shared_memory_status(name))
        assert message.startswith(f"Unable to find system shared memory region: '{name}': ")
        message = message_of(lambda: client.infer("tiny", [tensor]))
        assert message.startswith(f"Unable to find shared memory region: '{name}': "), message
        message = message_of(lambda: client.register_system_shared_memory(name, key, 256))
        assert message.startswith(f"failed to register shared memory region '{name}': invalid args")
    missing = f"/{name}_gone"
    message = message_of(lambda: client.register_system_shared_memory(name, missing, 8))
    assert message.startswith(f"Unable to open shared memory region: '{missing}': "), message


def _pending(server: RunningServer, model: str) -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    for line in text.splitlines():
        if line.startswith("nv_inference_pending_request_count{") and f'model="{model}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.slow
def test_queue_full_and_queue_timeout(protocol: str, compat_server: RunningServer) -> None:
    # sleepy: one instance, max_queue_size 2. While a 1 s request runs and one waits, a
    # request whose timeout passes in the queue is answered so (L0_batcher's queue timeout);
    # of five sent at once, one runs, two wait and the rest are refused (L0_model_queue).
    module = client_module(protocol)
    port = compat_server.http_port if protocol == "http" else compat_server.grpc_port
    kwargs = {"concurrency": 8} if protocol == "http" else {}
    client = module.InferenceServerClient(f"127.0.0.1:{port}", **kwargs)
    answers: list[Any] = []

    def sleep_for(seconds: float) -> list[Any]:
        return [_tensor(protocol, "INPUT0", np.array([seconds], np.float32))]

    def send(count: int) -> None:
        for _ in range(count):
            if protocol == "http":
                answers.append(client.async_infer("sleepy", sleep_for(1.0)))
            else:
                client.async_infer(
                    "sleepy", sleep_for(1.0), lambda result, error: answers.append(error)
                )

    def refusals() -> list[str]:
        if protocol == "http":
            texts = []
            for pending in answers:
                try:
                    pending.get_result()
                except InferenceServerException as exc:
                    texts.append(str(exc.message()))
            return texts
        wait_until(lambda: len(answers) == 7, timeout=60, what="seven answers")
        return [str(error.message()) for error in answers if error is not None]

    try:
        send(2)

        def one_runs_one_waits() -> bool:
            # One queued in two readings 0.2 s apart: the steady state (the first request
            # runs for 1 s), not a moment when both are still queued or one has not arrived.
            if _pending(compat_server, "sleepy") != 1:
                return False
            time.sleep(0.2)
            return _pending(compat_server, "sleepy") == 1

        wait_until(one_runs_one_waits, timeout=30, what="one running, one waiting")
        message = message_of(lambda: client.infer("sleepy", sleep_for(0.0), timeout=50_000))
        assert message.startswith("Request timeout expired: "), message
        send(5)  # the timed-out one left when the instance freed: one runs, two wait
        refused = refusals()
        assert refused, "no request was refused although at most three fit"
        assert all(text.startswith("Exceeds maximum queue size: ") for text in refused), refused
    finally:
        client.close()
