"""Triton's own gRPC clients against a real Conveyor server: every RPC, datatype and error path.

tritonclient.grpc (sync, async_infer with callbacks, start_stream/async_stream_infer) and
tritonclient.grpc.aio, unchanged; typed contents and malformed requests go through a stub
built on tritonclient's generated messages, so the wire format is Triton's, not ours.
"""

from __future__ import annotations

import asyncio
import queue
import random
import threading
from pathlib import Path
from typing import Any

import grpc
import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer
from tests.metrics import wait_pending
from tests.models import RunLog
from tests.server.grpc.grpc_helpers import MAX_MESSAGE_BYTES

# numpy dtype each datatype is sent with through tritonclient (BF16: ml_dtypes.bfloat16, which
# tritonclient requires since 2.67; older ones took float32 and truncated it).
TRITON_NUMPY = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
    "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
    "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
    "BF16": ml_dtypes.bfloat16, "BYTES": np.object_,
}  # fmt: skip


def sample(datatype: str, shape: tuple[int, int] = (2, 3)) -> np.ndarray:
    count = shape[0] * shape[1]
    if datatype == "BYTES":
        values = [f"élément {i}".encode() if i % 2 else bytes([0, i, 255]) for i in range(count)]
        return np.array(values, dtype=object).reshape(shape)
    if datatype == "BOOL":
        return (np.arange(count) % 3 == 0).reshape(shape)
    if datatype == "BF16":
        return sample("FP32", shape).astype(ml_dtypes.bfloat16)  # FP32's values are exact in BF16
    dtype = np.dtype(TRITON_NUMPY[datatype])
    values = (np.arange(count) - (count // 2 if dtype.kind in "if" else 0)).astype(dtype)
    if dtype.kind == "f":
        values = values * dtype.type(1.5)  # exact in FP16 and BF16 too
    if dtype.kind in "iu":
        values[-1] = np.iinfo(dtype).max  # the edge of the range survives the trip
    return values.reshape(shape)


@pytest.fixture(scope="module")
def client(grpc_address: str) -> Any:
    with grpcclient.InferenceServerClient(grpc_address) as c:
        yield c


@pytest.fixture(scope="module")
def stub(grpc_address: str) -> Any:
    channel = grpc.insecure_channel(grpc_address)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def tiny_input(value: float = 0.0, rows: int = 1) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput("INPUT0", [rows, 16], "FP32")
    tensor.set_data_from_numpy(np.full((rows, 16), value, np.float32))
    return tensor


def slow_inputs(seconds: float, tag: str) -> list[grpcclient.InferInput]:
    delay = grpcclient.InferInput("INPUT0", [1], "FP32")
    delay.set_data_from_numpy(np.array([seconds], np.float32))
    name = grpcclient.InferInput("TAG", [1], "BYTES")
    name.set_data_from_numpy(np.array([tag.encode()], dtype=object))
    return [delay, name]


def to(answers: queue.SimpleQueue[Any]) -> Any:
    """An async_infer callback that puts (result, error) into ``answers``."""
    return lambda result, error: answers.put((result, error))


def errors_to(errors: queue.SimpleQueue[Any]) -> Any:
    """An async_infer callback that puts only the error (None on success) into ``errors``."""
    return lambda result, error: errors.put(error)


def status_of(call: Any) -> tuple[str, str]:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value.status(), caught.value.message()


# -- health, metadata, configuration -----------------------------------------------------


def test_health(client: Any) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("tiny")
    assert client.is_model_ready("tiny", "1")
    assert not client.is_model_ready("no-such-model")
    assert not client.is_model_ready("tiny", "7")


def test_server_metadata(client: Any) -> None:
    metadata = client.get_server_metadata(as_json=True)
    assert metadata["name"] == "conveyor"
    assert metadata["version"]
    assert "statistics" in metadata["extensions"]


def test_model_metadata(client: Any) -> None:
    metadata = client.get_model_metadata("tiny", as_json=True)
    assert metadata["name"] == "tiny"
    assert metadata["versions"] == ["1"]
    assert metadata["platform"] == "onnxruntime_onnx"
    assert metadata["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": ["-1", "16"]}]
    assert metadata["outputs"][0]["name"] == "OUTPUT0"
    batched = client.get_model_metadata("batched")
    assert list(batched.inputs[0].shape) == [-1, 16]  # -1: the batch dimension


def test_model_config_parses_with_tritons_definition(client: Any) -> None:
    # tritonclient decodes the response with Triton's full model_config.proto, as
    # perf_analyzer does: every field we fill must land where Triton expects it.
    config = client.get_model_config("batched").config
    assert config.name == "batched"
    assert config.platform == "onnxruntime_onnx"
    assert config.backend == "onnxruntime"
    assert config.max_batch_size == 8
    assert config.input[0].name == "INPUT0"
    assert config.input[0].data_type == grpcclient.model_config_pb2.TYPE_FP32
    assert list(config.input[0].dims) == [16]
    assert list(config.output[0].dims) == [16]
    assert config.WhichOneof("scheduling_choice") == "dynamic_batching"
    assert config.dynamic_batching.max_queue_delay_microseconds == 100
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert config.instance_group[0].count >= 1
    assert config.instance_group[0].kind == grpcclient.model_config_pb2.ModelInstanceGroup.KIND_CPU
    echo = client.get_model_config("echo").config
    kinds = {tensor.name: tensor.data_type for tensor in echo.input}
    assert kinds["IN_BYTES"] == grpcclient.model_config_pb2.TYPE_STRING
    assert kinds["IN_BF16"] == grpcclient.model_config_pb2.TYPE_BF16
    assert all(tensor.optional for tensor in echo.input)


def test_metadata_and_config_of_unknown_model(client: Any) -> None:
    status, message = status_of(lambda: client.get_model_metadata("no-such-model"))
    assert status == "StatusCode.NOT_FOUND" and "no-such-model" in message
    status, _ = status_of(lambda: client.get_model_config("no-such-model"))
    assert status == "StatusCode.NOT_FOUND"
    status, _ = status_of(lambda: client.get_model_config("tiny", "9"))
    assert status == "StatusCode.NOT_FOUND"


def test_statistics(client: Any) -> None:
    before = client.get_inference_statistics("tiny").model_stats[0].inference_count
    for _ in range(3):
        client.infer("tiny", [tiny_input()])
    stats = client.get_inference_statistics("tiny", "1").model_stats
    assert len(stats) == 1
    assert stats[0].name == "tiny" and stats[0].version == "1"
    assert stats[0].inference_count == before + 3
    assert stats[0].inference_stats.success.count >= 3
    assert stats[0].inference_stats.compute_infer.ns > 0
    assert stats[0].last_inference > 0
    everything = client.get_inference_statistics().model_stats
    assert {"tiny", "echo", "sleep"} <= {s.name for s in everything}
    status, _ = status_of(lambda: client.get_inference_statistics("no-such-model"))
    assert status == "StatusCode.NOT_FOUND"


def test_repository_index_load_and_unload(client: Any) -> None:
    index = {m.name: m for m in client.get_model_repository_index().models}
    assert index["spare"].state == "READY" and index["spare"].version == "1"
    client.unload_model("spare")
    assert not client.is_model_ready("spare")
    index = {m.name: m for m in client.get_model_repository_index().models}
    assert index["spare"].state == "UNAVAILABLE"
    listed = {m["name"] for m in client.get_model_repository_index(as_json=True)["models"]}
    assert "spare" in listed  # the index still lists it
    status, _ = status_of(lambda: client.infer("spare", [tiny_input()]))
    assert status == "StatusCode.UNAVAILABLE"  # known but not loaded: retry may work
    client.load_model("spare")
    assert client.is_model_ready("spare")
    assert client.infer("spare", [tiny_input(1.0)]).as_numpy("OUTPUT0")[0, 0] == 2.0
    # (A name of its own: the engine remembers a failed load as an UNAVAILABLE entry.)
    status, message = status_of(lambda: client.load_model("not-in-the-repository"))
    assert status in ("StatusCode.NOT_FOUND", "StatusCode.UNAVAILABLE")
    assert "not-in-the-repository" in message


def test_repository_index_ready_only(stub: Any) -> None:
    everything = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(), timeout=10)
    ready = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True), timeout=10)
    assert {m.name for m in ready.models} <= {m.name for m in everything.models}
    assert all(m.state == "READY" for m in ready.models)


def test_cuda_shared_memory_register_answers_unimplemented(client: Any) -> None:
    # System shared memory is served (tests/server/shm); CUDA's has no GPU to use. Status
    # and unregister answer as Triton built without GPUs (tests/triton/compat/triton_examples).
    status, message = status_of(lambda: client.register_cuda_shared_memory("r", b"aGFuZGxl", 0, 64))
    assert status == "StatusCode.UNIMPLEMENTED"
    assert "CUDA shared memory is not supported on this server (no GPU)" in message
    # An unknown key is a clear client error, not UNIMPLEMENTED any more.
    status, message = status_of(lambda: client.register_system_shared_memory("r", "/key", 64))
    assert status == "StatusCode.INVALID_ARGUMENT"
    assert "shared memory" in message


# -- inference: datatypes and contents -----------------------------------------------------

ALL_TYPES = ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64")
ALL_TYPES += ("FP16", "FP32", "FP64", "BF16", "BYTES")


@pytest.mark.parametrize("datatype", ALL_TYPES)
def test_every_datatype_round_trips_raw(client: Any, datatype: str) -> None:
    data = sample(datatype)
    tensor = grpcclient.InferInput(f"IN_{datatype}", list(data.shape), datatype)
    tensor.set_data_from_numpy(data)
    result = client.infer(
        "echo", [tensor], outputs=[grpcclient.InferRequestedOutput(f"OUT_{datatype}")]
    )
    output = result.get_output(f"OUT_{datatype}")
    assert output.datatype == datatype
    assert list(output.shape) == [2, 3]
    assert not output.HasField("contents")  # outputs are always raw
    got = result.as_numpy(f"OUT_{datatype}")
    assert got.shape == data.shape
    assert got.tolist() == data.tolist()


def test_several_inputs_and_outputs_in_one_request(client: Any) -> None:
    inputs, outputs, sent = [], [], {}
    for datatype in ("BYTES", "FP16", "INT64", "BOOL"):
        sent[datatype] = sample(datatype, (3, 1))
        tensor = grpcclient.InferInput(f"IN_{datatype}", [3, 1], datatype)
        inputs.append(tensor.set_data_from_numpy(sent[datatype]))
        outputs.append(grpcclient.InferRequestedOutput(f"OUT_{datatype}"))
    result = client.infer("echo", inputs, outputs=outputs[::-1])
    for datatype, data in sent.items():
        assert result.as_numpy(f"OUT_{datatype}").tolist() == data.tolist()


TYPED = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}  # fmt: skip


def echo_request(datatype: str, data: np.ndarray) -> Any:
    request = service_pb2.ModelInferRequest(model_name="echo", id="typed")
    request.inputs.add(name=f"IN_{datatype}", datatype=datatype, shape=list(data.shape))
    request.outputs.add(name=f"OUT_{datatype}")
    return request


@pytest.mark.parametrize("datatype", sorted(TYPED))
def test_typed_contents_are_accepted(stub: Any, datatype: str) -> None:
    data = sample(datatype)
    request = echo_request(datatype, data)
    getattr(request.inputs[0].contents, TYPED[datatype]).extend(data.ravel().tolist())
    response = stub.ModelInfer(request, timeout=10)
    assert response.id == "typed" and response.model_name == "echo"
    assert response.model_version == "1"
    assert len(response.raw_output_contents) == 1  # answered raw all the same
    result = grpcclient.InferResult(response)
    assert result.as_numpy(f"OUT_{datatype}").tolist() == data.tolist()


def test_all_outputs_when_none_requested(client: Any) -> None:
    result = client.infer("tiny", [tiny_input(2.0, rows=3)])
    assert result.as_numpy("OUTPUT0").shape == (3, 16)
    assert (result.as_numpy("OUTPUT0") == 3.0).all()
    response = result.get_response()
    assert response.model_name == "tiny" and response.model_version == "1"


def test_request_id_comes_back(client: Any) -> None:
    assert client.infer("tiny", [tiny_input()], request_id="req-42").get_response().id == "req-42"


def test_batched_model(client: Any) -> None:
    result = client.infer("batched", [tiny_input(1.0, rows=5)])
    assert (result.as_numpy("OUTPUT0") == 2.0).all()


# -- inference: error paths ----------------------------------------------------------------


def expect(stub: Any, request: Any, code: grpc.StatusCode, *fragments: str) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        stub.ModelInfer(request, timeout=10)
    assert caught.value.code() == code, caught.value.details()
    for fragment in fragments:
        assert fragment in caught.value.details()
    return caught.value.details()


def raw_tiny(buffer: bytes, shape: tuple[int, ...] = (1, 16), datatype: str = "FP32") -> Any:
    request = service_pb2.ModelInferRequest(model_name="tiny")
    request.inputs.add(name="INPUT0", datatype=datatype, shape=list(shape))
    request.raw_input_contents.append(buffer)
    return request


def test_unknown_model_and_version_are_not_found(client: Any, stub: Any) -> None:
    status, message = status_of(lambda: client.infer("no-such-model", [tiny_input()]))
    assert status == "StatusCode.NOT_FOUND" and "no-such-model" in message
    request = raw_tiny(bytes(64))
    request.model_version = "3"
    expect(stub, request, grpc.StatusCode.NOT_FOUND, "no version 3")


def test_raw_size_mismatch_says_what_was_expected(stub: Any) -> None:
    expect(
        stub,
        raw_tiny(bytes(60)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "(raw_input_contents[0]) has 60 bytes",
        "needs 64",
    )
    bad = service_pb2.ModelInferRequest(model_name="echo")
    bad.inputs.add(name="IN_BYTES", datatype="BYTES", shape=[1, 2])
    bad.outputs.add(name="OUT_BYTES")
    bad.raw_input_contents.append(b"\x05\x00\x00\x00abc")
    expect(stub, bad, grpc.StatusCode.INVALID_ARGUMENT, "IN_BYTES", "length prefix says 5")


def test_raw_and_typed_may_not_be_mixed(stub: Any) -> None:
    request = service_pb2.ModelInferRequest(model_name="echo")
    first = request.inputs.add(name="IN_FP32", datatype="FP32", shape=[1, 1])
    first.contents.fp32_contents.append(1.0)
    request.inputs.add(name="IN_INT32", datatype="INT32", shape=[1, 1])
    request.raw_input_contents.extend([b"\x00" * 4, b"\x00" * 4])
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "all raw or all typed")


def test_raw_buffer_count_must_match_inputs(stub: Any) -> None:
    request = raw_tiny(bytes(64))
    request.raw_input_contents.append(bytes(64))
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "1 inputs but 2 raw_input_contents")


def test_typed_contents_errors(stub: Any) -> None:
    request = echo_request("FP32", np.zeros((1, 2)))
    request.inputs[0].contents.fp32_contents.append(1.0)  # 1 element for a shape of 2
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "needs 2 elements")
    request = echo_request("FP32", np.zeros((1, 1)))
    request.inputs[0].contents.int_contents.append(1)
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "expected fp32_contents")
    request = echo_request("FP16", np.zeros((1, 1)))
    request.inputs[0].contents.fp32_contents.append(1.0)
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "FP16 has no typed contents")
    request = echo_request("INT8", np.zeros((1, 1)))
    request.inputs[0].contents.int_contents.append(300)
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "outside INT8's range")


def test_inputs_that_do_not_fit_the_model(stub: Any) -> None:
    expect(stub, raw_tiny(bytes(64), datatype="INT32"), grpc.StatusCode.INVALID_ARGUMENT, "FP32")
    expect(stub, raw_tiny(bytes(64), datatype="FP33"), grpc.StatusCode.INVALID_ARGUMENT, "FP33")
    expect(stub, raw_tiny(bytes(64), (1, 4, 4)), grpc.StatusCode.INVALID_ARGUMENT, "shape")
    request = raw_tiny(bytes(64))
    request.inputs[0].name = "INPUT9"
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "missing input 'INPUT0'")
    request = raw_tiny(bytes(64))
    request.outputs.add(name="OUTPUT9")
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "OUTPUT9")
    request = raw_tiny(bytes(64))
    request.model_name = ""
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "model_name")


def test_unsupported_parameters_are_refused(stub: Any) -> None:
    request = raw_tiny(bytes(64))
    request.inputs[0].parameters["shared_memory_region"].string_param = "r"
    # Shared memory is served now; a region with no byte size is a client error.
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "shared memory")
    request = raw_tiny(bytes(64))
    request.parameters["priority"].string_param = "high"
    expect(stub, request, grpc.StatusCode.INVALID_ARGUMENT, "priority")


def test_model_failure_is_internal(client: Any) -> None:
    status, message = status_of(lambda: client.infer("broken", [sleep_input(1.0)]))
    assert status == "StatusCode.INTERNAL"
    assert "this model always fails" in message


def test_message_size_limit(client: Any) -> None:
    # Refused by gRPC before it is parsed, with RESOURCE_EXHAUSTED.
    count = MAX_MESSAGE_BYTES // 4 + 1024
    tensor = grpcclient.InferInput("INPUT0", [count], "FP32")
    tensor.set_data_from_numpy(np.zeros(count, np.float32))
    status, _ = status_of(lambda: client.infer("identity", [tensor]))
    assert status == "StatusCode.RESOURCE_EXHAUSTED"
    # Just under the limit goes through, both ways.
    count = (MAX_MESSAGE_BYTES - 4096) // 4
    data = np.arange(count, dtype=np.float32)
    tensor = grpcclient.InferInput("INPUT0", [count], "FP32").set_data_from_numpy(data)
    assert np.array_equal(client.infer("identity", [tensor]).as_numpy("OUTPUT0"), data)


def test_queue_full_is_unavailable(client: Any, repository: Path) -> None:
    log = RunLog(repository, "narrow")
    log.clear()
    running = queue.SimpleQueue()
    client.async_infer("narrow", slow_inputs(0.6, "A"), to(running))
    log.wait_for("A")
    client.async_infer("narrow", slow_inputs(0, "B"), to(running))
    status, message = status_of(lambda: client.infer("narrow", slow_inputs(0, "C")))
    assert status == "StatusCode.UNAVAILABLE"
    assert "max_queue_size" in message
    for _ in range(2):
        assert running.get(timeout=10)[1] is None
    assert log.tags() == ["A", "B"]


def test_client_deadline_passing_while_queued_means_it_never_runs(
    client: Any, server: RunningServer, repository: Path
) -> None:
    log = RunLog(repository, "slow")
    log.clear()
    done = queue.SimpleQueue()
    client.async_infer("slow", slow_inputs(1.0, "A"), errors_to(done))
    log.wait_for("A")
    status, _ = status_of(lambda: client.infer("slow", slow_inputs(0, "B"), client_timeout=0.3))
    assert status == "StatusCode.DEADLINE_EXCEEDED"
    assert done.empty()  # answered at the deadline, while A still ran
    assert done.get(timeout=10) is None
    # C queued after B runs after A: once it is back, B has been taken off the queue.
    assert client.infer("slow", slow_inputs(0, "C")).as_numpy("OUTPUT0").tolist() == [b"C"]
    assert log.tags() == ["A", "C"]
    assert wait_pending(server, "slow", 0) is None


def test_timeout_parameter_reaches_the_engine(client: Any, repository: Path) -> None:
    log = RunLog(repository, "slow")
    log.clear()
    done = queue.SimpleQueue()
    client.async_infer("slow", slow_inputs(0.5, "A"), errors_to(done))
    log.wait_for("A")
    # V2's timeout parameter is in microseconds; no gRPC deadline here.
    status, message = status_of(lambda: client.infer("slow", slow_inputs(0, "B"), timeout=100_000))
    assert status == "StatusCode.DEADLINE_EXCEEDED"
    assert "not run" in message
    assert done.get(timeout=10) is None
    client.infer("slow", slow_inputs(0, "C"))
    assert log.tags() == ["A", "C"]


def test_client_cancellation_drops_the_queued_request(
    client: Any, server: RunningServer, repository: Path
) -> None:
    log = RunLog(repository, "slow")
    log.clear()
    done = queue.SimpleQueue()
    client.async_infer("slow", slow_inputs(0.8, "A"), errors_to(done))
    log.wait_for("A")
    context = client.async_infer("slow", slow_inputs(0, "B"), errors_to(done))
    wait_pending(server, "slow", 1)  # B is queued on the server
    context.cancel()
    assert "CANCELLED" in str(done.get(timeout=10))
    wait_pending(server, "slow", 0)  # the server dropped it at once, not when A finished
    assert done.get(timeout=10) is None  # A
    client.infer("slow", slow_inputs(0, "C"))
    assert log.tags() == ["A", "C"]


def test_priority_reaches_the_engine(client: Any, server: RunningServer, repository: Path) -> None:
    log = RunLog(repository, "slow")
    log.clear()
    done = queue.SimpleQueue()
    client.async_infer("slow", slow_inputs(0.5, "A"), errors_to(done))
    log.wait_for("A")
    # Triton levels: 1 is the highest (and the default's level), 2 runs after it.
    client.async_infer("slow", slow_inputs(0, "LOW"), errors_to(done), priority=2)
    wait_pending(server, "slow", 1)
    client.async_infer("slow", slow_inputs(0, "HIGH"), errors_to(done), priority=1)
    for _ in range(3):
        assert done.get(timeout=10) is None
    assert log.tags() == ["A", "HIGH", "LOW"]


# -- async_infer with callbacks, asyncio client, streaming ---------------------------------


def test_async_infer_with_callbacks(client: Any) -> None:
    results: queue.SimpleQueue[tuple[int, Any, Any]] = queue.SimpleQueue()
    for i in range(50):
        client.async_infer(
            "tiny",
            [tiny_input(float(i))],
            lambda result, error, i=i: results.put((i, result, error)),
            request_id=str(i),
        )
    seen = set()
    for _ in range(50):
        i, result, error = results.get(timeout=20)
        assert error is None
        assert result.get_response().id == str(i)
        assert (result.as_numpy("OUTPUT0") == i + 1).all()
        seen.add(i)
    assert seen == set(range(50))


def test_tritonclient_aio(grpc_address: str) -> None:
    async def main() -> None:
        async with aioclient.InferenceServerClient(grpc_address) as client:
            assert await client.is_server_live()
            assert await client.is_server_ready()
            assert await client.is_model_ready("tiny")
            metadata = await client.get_model_metadata("tiny", as_json=True)
            assert metadata["name"] == "tiny"
            config = await client.get_model_config("tiny")
            assert config.config.name == "tiny"
            results = await asyncio.gather(
                *(client.infer("tiny", [tiny_input(float(i))]) for i in range(20))
            )
            for i, result in enumerate(results):
                assert (result.as_numpy("OUTPUT0") == i + 1).all()
            with pytest.raises(InferenceServerException) as caught:
                await client.infer("no-such-model", [tiny_input()])
            assert caught.value.status() == "StatusCode.NOT_FOUND"

            async def requests() -> Any:
                for i in range(10):
                    inputs = [tiny_input(float(i))]
                    yield {"model_name": "tiny", "inputs": inputs, "request_id": str(i)}

            answered = {}
            async for result, error in client.stream_infer(requests()):
                assert error is None
                answered[result.get_response().id] = result.as_numpy("OUTPUT0")[0, 0]
                if len(answered) == 10:
                    break
            assert answered == {str(i): i + 1.0 for i in range(10)}

    asyncio.run(main())


def sleep_input(seconds: float) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
    return tensor.set_data_from_numpy(np.array([seconds], np.float32))


def test_stream_answers_in_completion_order(client: Any) -> None:
    rng = random.Random(4)
    delays = {str(i): rng.uniform(0.0, 0.06) for i in range(200)}
    arrivals: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
    client.start_stream(callback=lambda result, error: arrivals.put((result, error)))
    try:
        for request_id, delay in delays.items():
            client.async_stream_infer("sleep", [sleep_input(delay)], request_id=request_id)
        received = [arrivals.get(timeout=30) for _ in range(200)]
    finally:
        client.stop_stream()
    order, ends = [], []
    for result, error in received:
        assert error is None
        request_id = result.get_response().id
        # Each answer is its own request's (the model echoes the delay it was given).
        assert result.as_numpy("OUTPUT0")[0] == np.float32(delays[request_id])
        order.append(request_id)
        ends.append(result.as_numpy("OUTPUT1")[1])  # when the model finished (monotonic)
    assert sorted(order, key=int) == list(delays)  # every request answered exactly once
    assert order != list(delays)  # not in the order sent ...
    # ... but in the order they completed (allowing for threads racing to hand results over).
    late = [i for i in range(1, 200) if ends[i] < ends[i - 1] - 0.02]
    assert not late, [(order[i], ends[i - 1] - ends[i]) for i in late]


def test_stream_errors_are_in_band_and_the_stream_goes_on(client: Any) -> None:
    arrivals: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
    client.start_stream(callback=lambda result, error: arrivals.put((result, error)))
    try:
        client.async_stream_infer("tiny", [tiny_input(1.0)], request_id="ok-1")
        client.async_stream_infer("no-such-model", [tiny_input()], request_id="bad-model")
        bad = grpcclient.InferInput("INPUT0", [1, 8], "FP32")
        bad.set_data_from_numpy(np.zeros((1, 8), np.float32))
        client.async_stream_infer("tiny", [bad], request_id="bad-shape")
        client.async_stream_infer("broken", [sleep_input(0)], request_id="bad-model-run")
        client.async_stream_infer("tiny", [tiny_input(2.0)], request_id="ok-2")
        received = [arrivals.get(timeout=20) for _ in range(5)]
    finally:
        client.stop_stream()
    errors = [str(error) for result, error in received if error is not None]
    successes = {r.get_response().id: r.as_numpy("OUTPUT0")[0, 0] for r, e in received if e is None}
    assert successes == {"ok-1": 2.0, "ok-2": 3.0}
    assert len(errors) == 3
    assert any("no-such-model" in e for e in errors)
    assert any("shape" in e for e in errors)
    assert any("this model always fails" in e for e in errors)


# -- one process, one engine, two protocols -------------------------------------------------


def test_http_and_grpc_share_one_engine(client: Any, server: RunningServer) -> None:
    http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        before = client.get_inference_statistics("tiny").model_stats[0].inference_count
        tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
        tensor.set_data_from_numpy(np.zeros((1, 16), np.float32))
        http.infer("tiny", [tensor])
        client.infer("tiny", [tiny_input()])
        after = client.get_inference_statistics("tiny").model_stats[0].inference_count
        assert after == before + 2
        http_stats = http.get_inference_statistics("tiny")["model_stats"][0]
        assert int(http_stats["inference_count"]) == after
    finally:
        http.close()


def test_bf16_from_numpy_bfloat16_is_bit_exact(stub: Any) -> None:
    data = np.array([[1.0, -2.5, 3.0e38, 1.0e-30]], dtype=ml_dtypes.bfloat16)
    request = echo_request("BF16", data)
    request.raw_input_contents.append(data.tobytes())
    response = stub.ModelInfer(request, timeout=10)
    assert response.raw_output_contents[0] == data.tobytes()


def test_threads_share_the_sync_client(client: Any) -> None:
    failures: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(20):
                out = client.infer("tiny", [tiny_input(float(offset + i))]).as_numpy("OUTPUT0")
                assert (out == offset + i + 1).all()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(100 * n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not failures
