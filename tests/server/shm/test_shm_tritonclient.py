"""Triton's system shared-memory extension, driven by tritonclient's own clients and
``tritonclient.utils.shared_memory``, over HTTP and gRPC, against a real server."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from conveyor.protocol.datatypes import DATATYPES
from conveyor.testing import RunningServer
from tests.server.http.http_util import request
from tests.server.shm.shm_util import region, server_fds, unique, wait_unmapped
from tests.tensors import sample

PROTOCOLS = ("http", "grpc")


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(protocol: str, http: Any, grpc_client: Any) -> Any:
    return http if protocol == "http" else grpc_client


def module_of(protocol: str) -> Any:
    return httpclient if protocol == "http" else grpcclient


def error_of(call: Any) -> str:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return str(caught.value.message())


def wire_bytes(data: np.ndarray) -> bytes:
    """The tensor's bytes as they sit in shared memory (BYTES: length-prefixed)."""
    if data.dtype == object:
        serialized = serialize_byte_tensor(data)
        return bytes(serialized.item())
    return np.ascontiguousarray(data).tobytes()


def status_names(client: Any, protocol: str, name: str = "") -> dict[str, dict[str, Any]]:
    status = client.get_system_shared_memory_status(name)
    if protocol == "http":
        return {entry["name"]: entry for entry in status}
    return {
        key: {"name": r.name, "key": r.key, "offset": r.offset, "byte_size": r.byte_size}
        for key, r in status.regions.items()
    }


# -- metadata and region management ------------------------------------------------------


def test_metadata_lists_the_extension(http: Any, grpc_client: Any) -> None:
    assert "system_shared_memory" in http.get_server_metadata()["extensions"]
    assert "system_shared_memory" in grpc_client.get_server_metadata().extensions


def test_register_status_unregister(client: Any, protocol: str) -> None:
    with region(256) as (first, first_key, _), region(128) as (second, second_key, _):
        client.register_system_shared_memory(first, first_key, 200, offset=56)
        client.register_system_shared_memory(second, second_key, 128)
        regions = status_names(client, protocol)
        assert regions[first] == {"name": first, "key": first_key, "offset": 56, "byte_size": 200}
        assert regions[second]["byte_size"] == 128
        assert set(status_names(client, protocol, second)) == {second}
        client.unregister_system_shared_memory(first)
        regions = status_names(client, protocol)
        assert first not in regions and second in regions
        client.unregister_system_shared_memory()  # all
        assert status_names(client, protocol) == {}
        message = error_of(lambda: client.get_system_shared_memory_status(first))
        assert first in message and "not registered" in message


def test_raw_http_routes_and_json_shape(shm_server: RunningServer) -> None:
    url = shm_server.http_url
    with region(64) as (name, key, _):
        body = b'{"key": "%s", "offset": 0, "byte_size": 64}' % key.encode()
        status, _, _ = request(url, "POST", f"/v2/systemsharedmemory/region/{name}/register", body)
        assert status == 200
        status, _, data = request(url, "GET", f"/v2/systemsharedmemory/region/{name}/status")
        assert status == 200
        import json

        assert json.loads(data) == [{"name": name, "key": key, "offset": 0, "byte_size": 64}]
        path = f"/v2/systemsharedmemory/region/{name}/unregister"
        assert request(url, "POST", path)[0] == 200
        status, _, data = request(url, "GET", "/v2/systemsharedmemory/status")
        assert status == 200 and name not in data.decode()


# -- inference ---------------------------------------------------------------------------


@pytest.mark.parametrize("datatype", DATATYPES)
def test_every_datatype_in_and_out_of_shared_memory(
    client: Any, protocol: str, datatype: str
) -> None:
    """INPUT0 in a region; OUTPUT0 written into another; OUTPUT1 still on the wire."""
    data = sample(datatype)
    payload = wire_bytes(data)
    size = max(len(payload), 1)
    module = module_of(protocol)
    with region(size) as (in_name, in_key, in_handle), region(size) as (out_name, out_key, out):
        shm.set_shared_memory_region(in_handle, [np.frombuffer(payload, np.uint8)])
        client.register_system_shared_memory(in_name, in_key, size)
        client.register_system_shared_memory(out_name, out_key, size)
        try:
            tensor = module.InferInput("INPUT0", list(data.shape), datatype)
            tensor.set_shared_memory(in_name, len(payload))
            to_region = module.InferRequestedOutput("OUTPUT0")
            to_region.set_shared_memory(out_name, size)
            on_wire = module.InferRequestedOutput("OUTPUT1")
            result = client.infer(f"echo_{datatype}", [tensor], outputs=[to_region, on_wire])
            assert result.as_numpy("OUTPUT1").tolist() == data.tolist()
            output = result.get_output("OUTPUT0")
            # Answered as Triton answers: name, datatype and shape, no data and no
            # parameters (Triton's C++ client, perf_analyzer's, reads any output parameters
            # as binary data); over gRPC an empty raw_output_contents entry keeps the pairing.
            if protocol == "http":
                assert "data" not in output and "parameters" not in output
                shape, got_type = output["shape"], output["datatype"]
            else:
                assert not output.parameters
                response = result.get_response()
                assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]
                assert response.raw_output_contents[0] == b""
                shape, got_type = list(output.shape), output.datatype
            assert got_type == datatype and shape == [2, 3]
            dtype = data.dtype if datatype != "BYTES" else np.object_
            got = shm.get_contents_as_numpy(out, dtype, shape)
            assert got.tolist() == data.tolist()
        finally:
            client.unregister_system_shared_memory(in_name)
            client.unregister_system_shared_memory(out_name)


def test_triton_simple_shm_client_flow(client: Any, protocol: str) -> None:
    """The flow of Triton's simple_{http,grpc}_shm_client: both inputs in one region at
    offsets 0 and 64, both outputs in another, the same regions reused for a second call."""
    module = module_of(protocol)
    client.unregister_system_shared_memory()
    with (
        region(128, "output_data") as (out_name, out_key, out),
        region(128, "input_data") as (in_name, in_key, inputs),
    ):
        client.register_system_shared_memory(out_name, out_key, 128)
        client.register_system_shared_memory(in_name, in_key, 128)
        for step in range(2):  # the regions are reused across requests
            a = np.arange(16, dtype=np.int32).reshape(1, 16) + step
            b = np.ones((1, 16), dtype=np.int32) * (step + 1)
            shm.set_shared_memory_region(inputs, [a])
            shm.set_shared_memory_region(inputs, [b], offset=64)
            tensors = [
                module.InferInput("INPUT0", [1, 16], "INT32"),
                module.InferInput("INPUT1", [1, 16], "INT32"),
            ]
            tensors[0].set_shared_memory(in_name, 64)
            tensors[1].set_shared_memory(in_name, 64, offset=64)
            outputs = [
                module.InferRequestedOutput("OUTPUT0"),
                module.InferRequestedOutput("OUTPUT1"),
            ]
            outputs[0].set_shared_memory(out_name, 64)
            outputs[1].set_shared_memory(out_name, 64, offset=64)
            result = client.infer("simple", tensors, outputs=outputs)
            assert result.get_output("OUTPUT0") is not None
            total = shm.get_contents_as_numpy(out, np.int32, [1, 16])
            difference = shm.get_contents_as_numpy(out, np.int32, [1, 16], offset=64)
            assert total.tolist() == (a + b).tolist()
            assert difference.tolist() == (a - b).tolist()
        assert set(status_names(client, protocol)) >= {out_name, in_name}
        client.unregister_system_shared_memory()
        assert status_names(client, protocol) == {}


# -- errors --------------------------------------------------------------------------------


def fp32_input(module: Any, name: str, byte_size: int, offset: int = 0) -> Any:
    tensor = module.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_shared_memory(name, byte_size, offset=offset)
    return tensor


def test_registration_errors(client: Any) -> None:
    with region(64) as (name, key, _):
        client.register_system_shared_memory(name, key, 64)
        try:
            message = error_of(lambda: client.register_system_shared_memory(name, key, 64))
            assert "already registered" in message and name in message
        finally:
            client.unregister_system_shared_memory(name)
        missing = unique("missing")
        message = error_of(lambda: client.register_system_shared_memory(missing, f"/{missing}", 8))
        assert "no such object" in message and missing in message
        message = error_of(lambda: client.register_system_shared_memory("x", "/../etc/passwd", 8))
        assert "not a plain name" in message
        message = error_of(lambda: client.register_system_shared_memory("a/b", key, 8))
        assert "not a plain name" in message
        message = error_of(lambda: client.register_system_shared_memory(name, key, 60, offset=8))
        assert "holds 64" in message
        assert name not in str(client.get_system_shared_memory_status())


def test_refuses_links_directories_and_fifos(client: Any) -> None:
    with region(64) as (_, key, _):
        link = unique("link")
        folder = unique("folder")
        fifo = unique("fifo")
        os.symlink(f"/dev/shm{key}", f"/dev/shm/{link}")
        os.mkdir(f"/dev/shm/{folder}")
        os.mkfifo(f"/dev/shm/{fifo}")
        try:
            for made in (link, folder, fifo):
                message = error_of(
                    lambda made=made: client.register_system_shared_memory(made, f"/{made}", 8)
                )
                assert "regular shared-memory object" in message, message
        finally:
            os.unlink(f"/dev/shm/{link}")
            os.rmdir(f"/dev/shm/{folder}")
            os.unlink(f"/dev/shm/{fifo}")


def test_infer_errors_name_region_offset_and_size(client: Any, protocol: str) -> None:
    module = module_of(protocol)
    with region(64) as (name, key, _):
        client.register_system_shared_memory(name, key, 64)
        try:
            unknown = unique("unknown")
            message = error_of(lambda: client.infer("tiny", [fp32_input(module, unknown, 64)]))
            assert unknown in message and "not registered" in message
            message = error_of(
                lambda: client.infer("tiny", [fp32_input(module, name, 64, offset=8)])
            )
            assert name in message and "offset 8" in message and "byte_size 64" in message
            out = module.InferRequestedOutput("OUTPUT0")
            out.set_shared_memory(name, 16)
            message = error_of(
                lambda: client.infer("tiny", [fp32_input(module, name, 64)], outputs=[out])
            )
            assert "OUTPUT0" in message and "needs 64" in message
            client.infer("tiny", [fp32_input(module, name, 64)])  # still serves
        finally:
            client.unregister_system_shared_memory(name)


def test_truncated_region_fails_cleanly_and_server_serves(
    client: Any, protocol: str, shm_server: RunningServer
) -> None:
    module = module_of(protocol)
    with region(64) as (name, key, _):
        client.register_system_shared_memory(name, key, 64)
        try:
            client.infer("tiny", [fp32_input(module, name, 64)])
            os.truncate(f"/dev/shm{key}", 0)
            message = error_of(lambda: client.infer("tiny", [fp32_input(module, name, 64)]))
            assert "truncated" in message and name in message
            out = module.InferRequestedOutput("OUTPUT0")
            out.set_shared_memory(name, 64)
            tensor = module.InferInput("INPUT0", [1, 16], "FP32")
            tensor.set_data_from_numpy(np.zeros((1, 16), np.float32))
            message = error_of(lambda: client.infer("tiny", [tensor], outputs=[out]))
            assert "truncated" in message
        finally:
            client.unregister_system_shared_memory(name)
    assert shm_server.process.poll() is None
    assert client.is_server_live()


def test_unlinked_region_keeps_working(client: Any, protocol: str) -> None:
    module = module_of(protocol)
    with region(64) as (name, key, handle):
        client.register_system_shared_memory(name, key, 64)
        try:
            os.unlink(f"/dev/shm{key}")  # the server's mapping stays valid
            shm.set_shared_memory_region(handle, [np.full((1, 16), 2, np.float32)])
            result = client.infer("tiny", [fp32_input(module, name, 64)])
            assert result.as_numpy("OUTPUT0").tolist() == [[3.0] * 16]
        finally:
            client.unregister_system_shared_memory(name)


def test_unregister_releases_the_mapping_and_descriptor(
    http: Any, shm_server: RunningServer
) -> None:
    with region(4096) as (name, key, _):
        http.register_system_shared_memory(name, key, 4096)
        http.infer("tiny", [fp32_input(httpclient, name, 64)])
        assert f"/dev/shm{key}" in server_fds(shm_server)
        http.unregister_system_shared_memory(name)
        wait_unmapped(shm_server, key)


def test_cuda_shared_memory_registration_is_refused_clearly(client: Any, protocol: str) -> None:
    # Status and unregister answer as Triton built without GPUs (no regions; nothing to
    # unregister): tests/triton/compat/triton_examples.
    message = error_of(lambda: client.register_cuda_shared_memory("r", b"aGFuZGxl", 0, 64))
    assert "CUDA shared memory is not supported on this server (no GPU)" in message


def test_cuda_register_route_answers_400_not_404(shm_server: RunningServer) -> None:
    path = "/v2/cudasharedmemory/region/r/register"
    status, _, body = request(shm_server.http_url, "POST", path, b"{}")
    assert status == 400 and b"no GPU" in body


def pending(server: RunningServer, model: str) -> int:
    import urllib.request

    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith("nv_inference_pending_request_count{") and f'model="{model}"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_unregister_while_queued_waits_for_the_request(
    grpc_client: Any, shm_server: RunningServer
) -> None:
    """``gate`` has one instance: a first request holds it, the second (in shared memory)
    waits in the queue while both its regions are unregistered, then still runs, reading
    and writing the mappings it holds."""
    import threading

    with region(4) as (in_name, in_key, inputs), region(4) as (out_name, out_key, out):
        shm.set_shared_memory_region(inputs, [np.array([0.01], np.float32)])
        grpc_client.register_system_shared_memory(in_name, in_key, 4)
        grpc_client.register_system_shared_memory(out_name, out_key, 4)
        blocker = grpcclient.InferInput("INPUT0", [1], "FP32")
        blocker.set_data_from_numpy(np.array([1.0], np.float32))
        queued = grpcclient.InferInput("INPUT0", [1], "FP32")
        queued.set_shared_memory(in_name, 4)
        wanted = grpcclient.InferRequestedOutput("OUTPUT0")
        wanted.set_shared_memory(out_name, 4)
        results: dict[str, Any] = {}

        def run(label: str, tensor: Any, outputs: Any) -> None:
            try:
                results[label] = grpc_client.infer("gate", [tensor], outputs=outputs)
            except InferenceServerException as exc:
                results[label] = exc

        first = threading.Thread(target=run, args=("first", blocker, None))
        first.start()
        second = threading.Thread(target=run, args=("second", queued, [wanted]))
        second.start()
        for _ in range(400):  # until one of them waits behind the other
            if pending(shm_server, "gate") >= 1:
                break
            threading.Event().wait(0.005)
        grpc_client.unregister_system_shared_memory()
        assert status_names(grpc_client, "grpc") == {}  # the names go at once
        first.join(30)
        second.join(30)
        assert not isinstance(results["second"], Exception), results["second"]
        assert shm.get_contents_as_numpy(out, np.float32, [1]).tolist() == [pytest.approx(0.01)]
        wait_unmapped(shm_server, in_key, out_key)  # and the mappings once it is answered
