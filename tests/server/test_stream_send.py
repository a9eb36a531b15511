"""A streamed response whose client stops reading (``--stream-send-timeout``).

A real ``conveyor serve`` per gRPC transport serves ``flood``: a decoupled model with one
instance that sends COUNT responses of SIZE int32 each, as fast as they are taken. A stalled
client opens a stream to it and reads nothing (gRPC: a raw HTTP/2 client that advertises a
zero window; SSE: a socket not read past the response's head). Meanwhile another client's
request to the same model must be answered once the timeout (2 s here) has passed: the
stalled request held the instance until then, and is cancelled at it. The stalled stream
must end with the error that names the option, and the server's memory must not grow
stall after stall.
"""

from __future__ import annotations

import json
import queue
import socket
import struct
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
import tritonclient.grpc as grpcclient

from conveyor import cli
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.testing import RunningServer, run_server
from tests.models import RepoBuilder
from tests.server.grpc.h2.raw_client import (
    END_STREAM,
    HEADERS,
    RST_STREAM,
    WINDOW_UPDATE,
    RawClient,
    frame,
    grpc_message,
)

TIMEOUT_S = 2.0
RESOURCE_EXHAUSTED = 8
OPTION = "--stream-send-timeout"

FLOOD = """
import numpy as np

class Model:
    def infer(self, inputs):
        block = np.arange(int(inputs["SIZE"][0]), dtype=np.int32)
        for _ in range(int(inputs["COUNT"][0])):
            yield {"OUT": block}
"""
FLOOD_CONFIG = """
backend = "python"
decoupled = true
max_batch_size = 0
instances = 1

[[inputs]]
name = "COUNT"
datatype = "INT32"
shape = [1]

[[inputs]]
name = "SIZE"
datatype = "INT32"
shape = [1]

[[outputs]]
name = "OUT"
datatype = "INT32"
shape = [-1]
"""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stream_send") / "models"
    RepoBuilder(root).python("flood", FLOOD, FLOOD_CONFIG)
    return root


def serve(repository: Path, transport: str) -> Iterator[RunningServer]:
    args = ["--grpc-transport", transport, OPTION, str(TIMEOUT_S)]
    with run_server(repository, extra_args=args) as running:
        running.transport = transport  # type: ignore[attr-defined]
        yield running
        assert running.stop() == 0, running.output()
        assert "Traceback" not in running.output(), running.output()


@pytest.fixture(scope="module")
def conveyor_server(repository: Path) -> Iterator[RunningServer]:
    yield from serve(repository, "conveyor")


@pytest.fixture(scope="module")
def grpcio_server(repository: Path) -> Iterator[RunningServer]:
    yield from serve(repository, "grpcio")


@pytest.fixture(params=["conveyor", "grpcio"])
def server(request: pytest.FixtureRequest) -> RunningServer:
    """Each gRPC transport's server, in turn."""
    running: RunningServer = request.getfixturevalue(f"{request.param}_server")
    return running


def flood_request(count: int, size: int) -> bytes:
    request = pb.ModelInferRequest(model_name="flood")
    for name, value in (("COUNT", count), ("SIZE", size)):
        request.inputs.add(name=name, datatype="INT32", shape=[1])
        request.raw_input_contents.append(np.array([value], np.int32).tobytes())
    return request.SerializeToString()


def grpc_bystander(server: RunningServer, wait: float) -> float:
    """Another client streams 3 responses from ``flood``; seconds it took (fails after
    ``wait``)."""
    answers: queue.Queue[tuple[object, object]] = queue.Queue()
    count = grpcclient.InferInput("COUNT", [1], "INT32")
    count.set_data_from_numpy(np.array([3], np.int32))
    size = grpcclient.InferInput("SIZE", [1], "INT32")
    size.set_data_from_numpy(np.array([4], np.int32))
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        client.start_stream(lambda result, error: answers.put((result, error)))
        start = time.monotonic()
        client.async_stream_infer("flood", [count, size])
        for _ in range(3):
            result, error = answers.get(timeout=wait)
            assert error is None, f"{error.message()} {error.status()}"  # type: ignore[attr-defined]
            assert result is not None
            np.testing.assert_array_equal(result.as_numpy("OUT"), np.arange(4, dtype=np.int32))
        took = time.monotonic() - start
        client.stop_stream()
    return took


def stalled_grpc_stream(server: RunningServer) -> RawClient:
    """A ModelStreamInfer asking for endless responses, on a connection whose windows are 0:
    nothing of any response can be sent."""
    client = RawClient(server.grpc_port, window=0, give_back=False)
    stream_id = client.headers("ModelStreamInfer")
    client.data(stream_id, grpc_message(flood_request(1_000_000, 1024)), end_stream=False)
    # The response headers go with the first response: the model runs this request now,
    # on its one instance.
    while not client.answers[stream_id].headers:
        assert client.read_frame() is not None, "the connection closed"
    return client


def test_a_grpc_stream_whose_client_reads_nothing_is_ended_and_frees_the_model(
    server: RunningServer,
) -> None:
    process = psutil.Process(server.process.pid)
    grpc_bystander(server, wait=30)  # warm: the model and both clients' paths have run
    before = process.memory_info().rss
    for _ in range(3):
        with stalled_grpc_stream(server) as stalled:
            # (a) the one instance is free again once the stalled request is cancelled,
            # at the timeout (not before: the stalled request held it till then).
            took = grpc_bystander(server, wait=TIMEOUT_S + 15)
            assert TIMEOUT_S * 0.8 < took < TIMEOUT_S + 10
            # (b) the stalled stream ends with the error naming the option. Conveyor's
            # transport sends it at the timeout; grpcio only after the response its write
            # holds, so the client gives window back to read on.
            stalled.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 24)))
            stalled.send(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1 << 24)))
            answer = stalled.answers[1]
            deadline = time.monotonic() + 20
            while not answer.ended and time.monotonic() < deadline:
                assert stalled.read_frame() is not None, "the connection closed"
            assert answer.ended, "the stalled stream was not ended"
            assert answer.reset is None
            assert answer.status() == RESOURCE_EXHAUSTED
            assert OPTION in answer.message() and f"{TIMEOUT_S:g} s" in answer.message()
            # Only what the transport held: none on Conveyor's (the call ended before the
            # window opened), what grpcio's write buffer took on grpcio's.
            assert len(answer.messages()) < (1 if server.transport == "conveyor" else 1000)  # type: ignore[attr-defined]
    # (c) three stalls cost no lasting memory.
    grown = process.memory_info().rss - before
    assert grown < 32 * 1024 * 1024, f"RSS grew {grown / 2**20:.0f} MiB"
    assert OPTION in server.output()


def test_a_grpc_stream_stalled_partway_through_a_message_is_reset(
    conveyor_server: RunningServer,
) -> None:
    """The window lets part of a response out, then stays shut: trailers cannot follow a
    half-sent message, so Conveyor's transport resets the stream (grpcio holds it until the
    client reads on, as in the test above)."""
    server = conveyor_server
    with RawClient(server.grpc_port, window=1000, give_back=False) as stalled:
        stream_id = stalled.headers("ModelStreamInfer")
        stalled.data(stream_id, grpc_message(flood_request(1_000_000, 1024)), end_stream=False)
        start = time.monotonic()
        answer = stalled.answers[stream_id]
        while not answer.ended:
            assert stalled.read_frame() is not None, "the connection closed"
        assert answer.reset == 0x8  # CANCEL
        assert TIMEOUT_S * 0.9 < time.monotonic() - start < TIMEOUT_S + 10
        assert 0 < len(answer.data) <= 1000
        assert [f.kind for f in stalled.frames if f.stream_id == stream_id][-1] == RST_STREAM
        assert not any(
            f.kind == HEADERS and f.flags & END_STREAM
            for f in stalled.frames
            if f.stream_id == stream_id
        )
    assert grpc_bystander(server, wait=15) < 10


def sse_request(port: int, count: int, size: int) -> bytes:
    body = json.dumps({"COUNT": count, "SIZE": size}).encode()
    return (
        b"POST /v2/models/flood/generate_stream HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (port, len(body), body)
    )


def sse_bystander(server: RunningServer, wait: float) -> float:
    """Another client's generate_stream of 3 responses; seconds it took."""
    request = urllib.request.Request(
        f"{server.http_url}/v2/models/flood/generate_stream",
        data=json.dumps({"COUNT": 3, "SIZE": 4}).encode(),
        headers={"content-type": "application/json"},
    )
    start = time.monotonic()
    with urllib.request.urlopen(request, timeout=wait) as response:
        events = [line for line in response.read().split(b"\n") if line.startswith(b"data: ")]
    assert [json.loads(event[6:])["OUT"] for event in events] == [[0, 1, 2, 3]] * 3
    return time.monotonic() - start


def test_an_sse_stream_whose_client_reads_nothing_is_closed_and_frees_the_model(
    conveyor_server: RunningServer,
) -> None:
    server = conveyor_server  # HTTP does not depend on the gRPC transport
    process = psutil.Process(server.process.pid)
    sse_bystander(server, wait=30)
    before = process.memory_info().rss
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=20) as stalled:
            # 64 KiB responses, endless, not read past the response's head (which comes
            # with the first one: the model runs it): the socket's buffers fill, then the
            # server's transport's, then the model's stream.
            stalled.sendall(sse_request(server.http_port, 1_000_000, 16 * 1024))
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = stalled.recv(1)
                assert chunk, "the connection closed"
                head += chunk
            assert head.startswith(b"HTTP/1.1 200")
            took = sse_bystander(server, wait=TIMEOUT_S + 15)
            assert TIMEOUT_S * 0.8 < took < TIMEOUT_S + 10
            # The server closed the connection: what it had sent is read, then the end.
            deadline = time.monotonic() + 20
            received = 0
            while time.monotonic() < deadline:
                try:
                    chunk = stalled.recv(1 << 20)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                received += len(chunk)
            else:
                pytest.fail("the stalled SSE connection was not closed")
            assert received < 64 * 1024 * 1024  # bounded: nowhere near the endless stream
    grown = process.memory_info().rss - before
    assert grown < 32 * 1024 * 1024, f"RSS grew {grown / 2**20:.0f} MiB"
    assert "HTTP stream closed: the client took none of this stream's responses for " in (
        server.output()
    )


def test_a_negative_timeout_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", OPTION, "-1"]) == 2
    assert "stream_send_timeout must be >= 0 seconds (0: no limit)" in capsys.readouterr().err
