"""Triton's system shared-memory examples (simple_{http,grpc}_shm[_string]_client.py,
reuse_infer_objects_client.py) first clear every CUDA region, then use system shared
memory. With no GPU there is never a CUDA region, so those calls answer as Triton built
without GPUs does: the status lists none, unregistering succeeds; only registering one is
refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, triton_to_np_dtype

from conveyor.testing import run_server
from tests.server.shm.shm_util import shm_repository, unique
from tests.triton.compat.triton_examples.clients import module_of


def error_of(call: Any) -> str:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return str(caught.value.message())


def test_the_examples_cleanup_then_system_shared_memory(client: Any, protocol: str) -> None:
    # As the examples do: clear both kinds of region, then add with shared-memory tensors.
    client.unregister_system_shared_memory()
    client.unregister_cuda_shared_memory()
    module = module_of(protocol)
    first = np.arange(16, dtype=np.int32)
    second = np.ones(16, dtype=np.int32)
    size = first.nbytes
    inputs_name, outputs_name = unique("examples_in"), unique("examples_out")
    in_handle = shm.create_shared_memory_region(inputs_name, f"/{inputs_name}", size * 2)
    out_handle = shm.create_shared_memory_region(outputs_name, f"/{outputs_name}", size * 2)
    try:
        shm.set_shared_memory_region(in_handle, [first])
        shm.set_shared_memory_region(in_handle, [second], offset=size)
        client.register_system_shared_memory(inputs_name, f"/{inputs_name}", size * 2)
        client.register_system_shared_memory(outputs_name, f"/{outputs_name}", size * 2)
        inputs = [module.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_shared_memory(inputs_name, size)
        inputs[1].set_shared_memory(inputs_name, size, offset=size)
        outputs = [module.InferRequestedOutput(n) for n in ("OUTPUT0", "OUTPUT1")]
        outputs[0].set_shared_memory(outputs_name, size)
        outputs[1].set_shared_memory(outputs_name, size, offset=size)
        result = client.infer("simple", inputs, outputs=outputs)
        answers = []
        for index, name in enumerate(("OUTPUT0", "OUTPUT1")):
            output = result.get_output(name)
            datatype = output["datatype"] if protocol == "http" else output.datatype
            shape = output["shape"] if protocol == "http" else list(output.shape)
            answers.append(
                shm.get_contents_as_numpy(
                    out_handle, triton_to_np_dtype(datatype), shape, offset=index * size
                )
            )
        assert answers[0].tolist() == [(first + second).tolist()]
        assert answers[1].tolist() == [(first - second).tolist()]
        client.unregister_system_shared_memory()
        client.unregister_cuda_shared_memory()
    finally:
        shm.destroy_shared_memory_region(in_handle)
        shm.destroy_shared_memory_region(out_handle)


def test_cuda_status_lists_no_regions(client: Any, protocol: str) -> None:
    status = client.get_cuda_shared_memory_status()
    assert (status == []) if protocol == "http" else (len(status.regions) == 0)


def test_cuda_status_of_a_named_region_is_not_found(client: Any) -> None:
    message = error_of(lambda: client.get_cuda_shared_memory_status("missing"))
    assert message.startswith("Unable to find cuda shared memory region: 'missing'")


def test_unregistering_a_named_cuda_region_succeeds(client: Any) -> None:
    client.unregister_cuda_shared_memory("missing")  # nothing registered: nothing to do


def test_registering_a_cuda_region_is_refused_in_tritons_words(client: Any) -> None:
    message = error_of(lambda: client.register_cuda_shared_memory("r", b"aGFuZGxl", 0, 64))
    assert message.startswith("failed to register CUDA shared memory region: 'r', GPUs not")
    assert "use system shared memory" in message


def test_unregistering_cuda_regions_is_refused_while_shared_memory_is_off(
    tmp_path: Any,
) -> None:
    # As Triton refuses both kinds of unregister when client shared memory is not allowed.
    import tritonclient.http as httpclient

    repository = shm_repository(tmp_path / "models")
    with run_server(repository, extra_args=["--shared-memory", "off"]) as server:
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            message = error_of(lambda: client.unregister_cuda_shared_memory())
            assert "shared memory is off" in message
            assert client.get_cuda_shared_memory_status() == []
        finally:
            client.close()
