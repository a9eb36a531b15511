"""ONNX outputs written straight into the client's shared-memory region, driven by
tritonclient over HTTP and gRPC against a real server: the first request of a kind (its
output shape not yet known), the ones after it (computed in place), shapes that change,
a region too small, BYTES outputs and batched executions all answer what they did before."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from conveyor.testing import RunningServer
from tests.server.shm.iobinding.iobinding_models import FILL_VALUE, connect
from tests.server.shm.shm_util import region, wait_unmapped

GARBAGE = -123.0


def module_of(protocol: str) -> Any:
    return httpclient if protocol == "http" else grpcclient


@contextlib.contextmanager
def registered(client: Any, byte_size: int) -> Iterator[tuple[str, Any]]:
    """(name, handle) of a fresh region registered with the server."""
    with region(byte_size, "conveyor_iob") as (name, key, handle):
        client.register_system_shared_memory(name, key, byte_size)
        try:
            yield name, handle
        finally:
            client.unregister_system_shared_memory(name)


def infer_into(
    client: Any,
    protocol: str,
    model: str,
    inputs: dict[str, tuple[np.ndarray, str]],
    out_region: tuple[str, Any],
    out_size: int,
    output: str = "OUTPUT0",
) -> Any:
    """One request, inputs in the body, ``output`` into ``out_region`` (pre-filled with
    garbage so that a stale or missing write shows); the client's result."""
    module = module_of(protocol)
    name, handle = out_region
    shm.set_shared_memory_region(handle, [np.full(out_size // 4, GARBAGE, np.float32)])
    tensors = []
    for input_name, (array, datatype) in inputs.items():
        tensor = module.InferInput(input_name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    wanted = module.InferRequestedOutput(output)
    wanted.set_shared_memory(name, out_size)
    return client.infer(model, tensors, outputs=[wanted])


def answered_shape(result: Any, output: str = "OUTPUT0") -> list[int]:
    entry = result.get_output(output)
    shape = entry["shape"] if isinstance(entry, dict) else entry.shape
    return [int(d) for d in shape]


def test_identity_outputs_land_in_the_region_request_after_request(
    client: Any, protocol: str
) -> None:
    """The first request teaches the output's shape, the next ones are computed in place;
    a new input shape starts over; every answer is right and says where it went."""
    size = 4096 * 4
    with registered(client, size) as out:
        for length, seed in ((4096, 1), (4096, 2), (4096, 3), (1000, 4), (1000, 5), (4096, 6)):
            data = np.arange(length, dtype=np.float32) * seed
            result = infer_into(client, protocol, "identity", {"INPUT0": (data, "FP32")}, out, size)
            assert answered_shape(result) == [length]
            written = shm.get_contents_as_numpy(out[1], np.float32, [size // 4])
            np.testing.assert_array_equal(written[:length], data)
            assert (written[length:] == GARBAGE).all()  # nothing written past the output


def test_an_output_shape_that_changes_for_the_same_input_shape(client: Any, protocol: str) -> None:
    """``fill`` makes LENGTH[0] values: each request has input shape [1], yet the output
    shape changes; a request bound to the last shape runs again unbound, answers right."""
    size = 16 * 4
    with registered(client, size) as out:
        for length in (4, 4, 6, 6, 3, 4, 4):
            count = np.array([length], np.int64)
            result = infer_into(client, protocol, "fill", {"LENGTH": (count, "INT64")}, out, size)
            assert answered_shape(result) == [length]
            written = shm.get_contents_as_numpy(out[1], np.float32, [size // 4])
            assert written[:length].tolist() == [FILL_VALUE] * length
            assert (written[length:] == GARBAGE).all()


def test_an_output_written_over_its_own_input(client: Any, protocol: str) -> None:
    """Input and output at the same place of one region: never computed in place (the model
    would read what it overwrote), yet the region ends up holding the output."""
    module = module_of(protocol)
    data = np.arange(512, dtype=np.float32)
    size = data.nbytes
    with registered(client, size) as (name, handle):
        for _ in range(3):
            shm.set_shared_memory_region(handle, [data])
            tensor = module.InferInput("INPUT0", [512], "FP32")
            tensor.set_shared_memory(name, size)
            wanted = module.InferRequestedOutput("OUTPUT0")
            wanted.set_shared_memory(name, size)
            result = client.infer("identity", [tensor], outputs=[wanted])
            assert answered_shape(result) == [512]
            written = shm.get_contents_as_numpy(handle, np.float32, [512])
            np.testing.assert_array_equal(written, data)


def test_a_region_written_in_place_is_unmapped_once_unregistered(
    client: Any, protocol: str, iobinding_server: RunningServer
) -> None:
    """Nothing keeps a view of a region the model wrote into: unregistered, it is unmapped."""
    data = np.arange(1024, dtype=np.float32)
    with region(data.nbytes, "conveyor_iob") as (name, key, handle):
        client.register_system_shared_memory(name, key, data.nbytes)
        for _ in range(3):  # the later ones computed in place
            infer_into(
                client,
                protocol,
                "identity",
                {"INPUT0": (data, "FP32")},
                (name, handle),
                data.nbytes,
            )
        client.unregister_system_shared_memory(name)
        wait_unmapped(iobinding_server, key)
        np.testing.assert_array_equal(shm.get_contents_as_numpy(handle, np.float32, [1024]), data)


def test_a_region_too_small_is_the_usual_error(client: Any, protocol: str) -> None:
    """Once the shape is known, too little room still gets the clear error (nothing is
    computed into it), before as after, and a region with room works again after."""
    data = np.arange(256, dtype=np.float32)
    with registered(client, 1024) as roomy, registered(client, 1020) as small:
        infer_into(client, protocol, "identity", {"INPUT0": (data, "FP32")}, roomy, 1024)
        for _ in range(2):
            with pytest.raises(InferenceServerException) as caught:
                infer_into(client, protocol, "identity", {"INPUT0": (data, "FP32")}, small, 1020)
            message = str(caught.value.message())
            assert "shared_memory_byte_size is 1020 bytes" in message, message
            assert "needs 1024" in message, message
        infer_into(client, protocol, "identity", {"INPUT0": (data, "FP32")}, roomy, 1024)
        written = shm.get_contents_as_numpy(roomy[1], np.float32, [256])
        np.testing.assert_array_equal(written, data)


def test_bytes_outputs_are_written_as_before(client: Any, protocol: str) -> None:
    """A string output is never bound: it is written length-prefixed, as ever."""
    words = np.array([b"alpha", b"", "r\u00e9sum\u00e9".encode(), b"omega" * 20], dtype=object)
    size = len(bytes(serialize_byte_tensor(words).item())) + 64
    with registered(client, size) as out:
        for _ in range(3):
            inputs = {"INPUT0": (words, "BYTES")}
            result = infer_into(client, protocol, "strings", inputs, out, size)
            assert answered_shape(result) == [len(words)]
            written = shm.get_contents_as_numpy(out[1], np.object_, [len(words)])
            assert written.tolist() == words.tolist()


def test_requests_batched_together_each_get_their_rows(
    iobinding_server: RunningServer, protocol: str
) -> None:
    """Four requests at once fill ``scale``'s preferred batch of 4: they share one
    execution (no destinations then), and each region still gets its own rows."""
    rows = [np.full((1, 8), float(i + 1), np.float32) for i in range(4)]
    size = 8 * 4
    stats_client = connect(iobinding_server, "http")
    before = execution_counts(stats_client)
    barrier = threading.Barrier(len(rows))
    results: dict[int, Any] = {}

    def one(index: int) -> None:
        client = connect(iobinding_server, protocol)
        try:
            with registered(client, size) as out:
                barrier.wait(10)
                try:
                    inputs = {"INPUT0": (rows[index], "FP32")}
                    infer_into(client, protocol, "scale", inputs, out, size)
                    results[index] = shm.get_contents_as_numpy(out[1], np.float32, [1, 8]).copy()
                except InferenceServerException as exc:
                    results[index] = exc
        finally:
            client.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(rows))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for index, data in enumerate(rows):
        assert not isinstance(results[index], Exception), results[index]
        np.testing.assert_array_equal(results[index], data * 2)
    after = execution_counts(stats_client)
    inferences, executions = after[0] - before[0], after[1] - before[1]
    stats_client.close()
    assert inferences == 4
    assert executions < 4  # some requests shared an execution


def execution_counts(client: Any) -> tuple[int, int]:
    """``scale``'s (inference count, execution count) from its statistics."""
    stats = client.get_inference_statistics("scale")["model_stats"][0]
    return int(stats["inference_count"]), int(stats["execution_count"])
