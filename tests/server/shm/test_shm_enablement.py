"""Shared memory turned off, and a server stopped with regions registered and in use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.testing import run_server
from tests.server.http.http_util import request
from tests.server.shm.shm_util import region, server_maps

OFF = "shared memory is off on this server: it was started with --shared-memory off"


def test_off_hides_the_extension_and_answers_400(shm_repo: Path) -> None:
    with (
        region(64) as (name, key, _),
        run_server(shm_repo, extra_args=["--shared-memory", "off"]) as server,
    ):
        status, _, body = request(server.http_url, "GET", "/v2")
        assert "system_shared_memory" not in json.loads(body)["extensions"]
        for method, path, data in (
            (
                "POST",
                f"/v2/systemsharedmemory/region/{name}/register",
                b'{"key": "/k", "byte_size": 8}',
            ),
            ("GET", "/v2/systemsharedmemory/status", b""),
            ("POST", "/v2/systemsharedmemory/unregister", b""),
        ):
            status, _, body = request(server.http_url, method, path, data)
            assert status == 400 and OFF in json.loads(body)["error"], body
        http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
        tensor.set_shared_memory(name, 64)
        with pytest.raises(InferenceServerException, match="shared memory is off"):
            http.infer("tiny", [tensor])
        http.close()
        grpc = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
        assert "system_shared_memory" not in grpc.get_server_metadata().extensions
        with pytest.raises(InferenceServerException) as caught:
            grpc.register_system_shared_memory(name, key, 64)
        assert caught.value.status() == "StatusCode.UNIMPLEMENTED"
        assert OFF in str(caught.value.message())
        grpc.close()


def test_stopping_with_regions_registered_exits_cleanly(shm_repo: Path) -> None:
    with region(4096) as (name, key, _), run_server(shm_repo) as server:
        http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        http.register_system_shared_memory(name, key, 4096)
        tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
        tensor.set_shared_memory(name, 64)
        http.infer("tiny", [tensor])
        assert f"/dev/shm{key}" in server_maps(server)
        http.close()
        assert server.stop() == 0
