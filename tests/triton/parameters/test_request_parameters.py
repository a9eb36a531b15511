"""request.parameters(): the request's own parameters as a JSON string, over both protocols,
on thread and process instances."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server

ECHO_PARAMETERS = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("PARAMETERS", np.array([r.parameters().encode()], np.object_))]
            )
            for r in requests
        ]
"""

CONFIG = """
backend = "python"
instance_kind = "{kind}"
[[inputs]]
name = "X"
datatype = "FP32"
shape = [1]
[[outputs]]
name = "PARAMETERS"
datatype = "BYTES"
shape = [1]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    repository = tmp_path_factory.mktemp("parameters")
    for kind in ("thread", "process"):
        folder = Path(repository, f"echo_{kind}", "1")
        folder.mkdir(parents=True)
        (folder / "model.py").write_text(textwrap.dedent(ECHO_PARAMETERS))
        (folder.parent / "config.toml").write_text(CONFIG.format(kind=kind))
    with run_server(repository) as running:
        yield running


def _parameters_seen(server: RunningServer, protocol: str, model: str, **kwargs: Any) -> Any:
    lib: Any = httpclient if protocol == "http" else grpcclient
    url = (server.http_url if protocol == "http" else server.grpc_url).split("://")[1]
    client = lib.InferenceServerClient(url)
    try:
        x = lib.InferInput("X", [1], "FP32")
        x.set_data_from_numpy(np.zeros(1, np.float32))
        result = client.infer(model, [x], **kwargs)
    finally:
        client.close()
    return json.loads(result.as_numpy("PARAMETERS")[0])


@pytest.mark.parametrize("kind", ["thread", "process"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_model_reads_the_requests_parameters(server: RunningServer, protocol: str, kind: str):
    sent = {"temperature": 0.5, "max_tokens": 12, "stream": False, "mode": "greedy"}
    seen = _parameters_seen(server, protocol, f"echo_{kind}", parameters=sent)
    assert seen == sent
    # Those the server reads itself (priority, timeout, ...) are not the model's.
    seen = _parameters_seen(server, protocol, f"echo_{kind}", priority=1, timeout=10_000_000)
    assert seen == {}


def test_a_grpc_stream_carries_each_requests_parameters(server: RunningServer):
    import queue

    answers: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url.split("://")[1])
    try:
        client.start_stream(callback=lambda result, error: answers.put(error or result))
        x = grpcclient.InferInput("X", [1], "FP32")
        x.set_data_from_numpy(np.zeros(1, np.float32))
        client.async_stream_infer("echo_thread", [x], parameters={"turn": 1, "who": "me"})
        answer = answers.get(timeout=30)
        client.stop_stream()
    finally:
        client.close()
    assert json.loads(answer.as_numpy("PARAMETERS")[0]) == {"turn": 1, "who": "me"}
