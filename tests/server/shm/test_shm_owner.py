"""Whose /dev/shm objects a client may register: the server's own user's, or those of a
user or group the operator names. A hostile local client must not map another user's
private object and read it back through a model (the tests run as root, as the server
does: chown makes an object "another user's")."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer, run_server
from tests.server.http.http_util import request
from tests.server.shm.shm_util import region

OTHER_UID = 65534  # nobody
OTHER_GID = 65534  # nogroup
SECRET = np.arange(100, 116, dtype=np.int32).reshape(1, 16)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def chown(key: str, uid: int, gid: int) -> None:
    os.chown(f"/dev/shm{key}", uid, gid)
    os.chmod(f"/dev/shm{key}", 0o600)


def read_through_simple(client: Any, module: Any, name: str) -> np.ndarray:
    """INPUT0 from region ``name``, INPUT1 zeros: OUTPUT0 is the region's content."""
    first = module.InferInput("INPUT0", [1, 16], "INT32")
    first.set_shared_memory(name, SECRET.nbytes)
    second = module.InferInput("INPUT1", [1, 16], "INT32")
    second.set_data_from_numpy(np.zeros((1, 16), np.int32))
    result = client.infer("simple", [first, second])
    output: np.ndarray = result.as_numpy("OUTPUT0")
    return output


def still_served(client: Any, module: Any) -> None:
    """Another client's plain request is answered after the refusal."""
    data = np.ones((1, 16), np.int32)
    inputs = [module.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(data)
    assert client.infer("simple", inputs).as_numpy("OUTPUT0").tolist() == (data * 2).tolist()


def test_another_users_object_is_refused_over_http(shm_server: RunningServer, http: Any) -> None:
    with region(SECRET.nbytes) as (name, key, handle):
        shm.set_shared_memory_region(handle, [SECRET])
        chown(key, OTHER_UID, OTHER_GID)
        body = json.dumps({"key": key, "offset": 0, "byte_size": SECRET.nbytes}).encode()
        status, _, data = request(
            shm_server.http_url, "POST", f"/v2/systemsharedmemory/region/{name}/register", body
        )
        assert status == 400, data
        message = json.loads(data)["error"]
        assert message.startswith(f"Unable to open shared memory region: '{key}'")
        assert f"uid {OTHER_UID}" in message and "'root' (uid 0)" in message
        assert "--shared-memory-user" in message
        # Not registered: an infer naming it is refused, and the secret never comes back.
        with pytest.raises(InferenceServerException) as caught:
            read_through_simple(http, httpclient, name)
        assert "not registered" in str(caught.value)
        assert name not in json.dumps(http.get_system_shared_memory_status())
        still_served(http, httpclient)


def test_another_users_object_is_refused_over_grpc(grpc_client: Any) -> None:
    with region(SECRET.nbytes) as (name, key, handle):
        shm.set_shared_memory_region(handle, [SECRET])
        chown(key, OTHER_UID, OTHER_GID)
        with pytest.raises(InferenceServerException) as caught:
            grpc_client.register_system_shared_memory(name, key, SECRET.nbytes)
        assert caught.value.status() == str(grpc.StatusCode.INVALID_ARGUMENT)
        message = str(caught.value.message())
        assert f"Unable to open shared memory region: '{key}'" in message
        assert f"uid {OTHER_UID}" in message
        assert name not in grpc_client.get_system_shared_memory_status().regions
        still_served(grpc_client, grpcclient)


@pytest.fixture(scope="module")
def admitting_server(shm_repo: Path) -> Iterator[RunningServer]:
    """Admits nobody's objects by name, and objects of group 'nogroup' by number."""
    args = ["--shared-memory-user", "nobody", "--shared-memory-group", str(OTHER_GID)]
    with run_server(shm_repo, extra_args=args) as running:
        yield running
        assert running.process.poll() is None, running.output()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    "owner", [(OTHER_UID, 0), (OTHER_UID - 1, OTHER_GID)], ids=["named-user", "named-group"]
)
def test_the_option_admits_a_named_owner(
    admitting_server: RunningServer, protocol: str, owner: tuple[int, int]
) -> None:
    if protocol == "http":
        module: Any = httpclient
        client = module.InferenceServerClient(admitting_server.http_url.removeprefix("http://"))
    else:
        module = grpcclient
        client = module.InferenceServerClient(admitting_server.grpc_url.removeprefix("grpc://"))
    try:
        with region(SECRET.nbytes) as (name, key, handle):
            shm.set_shared_memory_region(handle, [SECRET])
            chown(key, *owner)
            client.register_system_shared_memory(name, key, SECRET.nbytes)
            try:
                assert read_through_simple(client, module, name).tolist() == SECRET.tolist()
            finally:
                client.unregister_system_shared_memory(name)
        # An owner neither named nor the server's own is still refused.
        with region(SECRET.nbytes) as (name, key, _):
            chown(key, OTHER_UID - 2, OTHER_GID - 2)
            with pytest.raises(InferenceServerException) as caught:
                client.register_system_shared_memory(name, key, SECRET.nbytes)
            message = str(caught.value.message())
            assert "'nobody' (uid 65534)" in message and "'nogroup' (gid 65534)" in message
    finally:
        client.close()


def test_an_unknown_user_or_group_is_refused_at_start(shm_repo: Path) -> None:
    for option in ("--shared-memory-user", "--shared-memory-group"):
        args = [option, "no-such-account-here"]
        with run_server(shm_repo, extra_args=args, wait=False) as running:
            assert running.process.wait(timeout=60) != 0
            output = running.output()
            assert f"{option} 'no-such-account-here'" in output, output
