"""Choosing the gRPC transport; draining with GOAWAY; TLS with ALPN "h2"."""

from __future__ import annotations

import queue
import signal
import socket
import ssl
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from conveyor.server.settings import GrpcTransport, Settings
from conveyor.testing import run_server
from tests.models import RepoBuilder, RunLog
from tests.reliability.rel_util import self_signed
from tests.server.grpc.h2.raw_client import (
    GOAWAY,
    PREFACE,
    SETTINGS,
    RawClient,
    frame,
    grpc_message,
)
from tests.server.grpc.h2.requests import runs_request

X = np.arange(16, dtype=np.float32).reshape(1, 16)


def tiny_input() -> grpcclient.InferInput:
    x = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    x.set_data_from_numpy(X)
    return x


def test_the_transport_setting_names_its_choices() -> None:
    assert Settings().grpc_transport is GrpcTransport.CONVEYOR
    assert Settings(grpc_transport="grpcio").grpc_transport is GrpcTransport.GRPCIO  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grpc_transport must be one of conveyor, grpcio"):
        Settings(grpc_transport="h3")  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", ["grpcio", "conveyor"])
def test_either_transport_serves_unary_calls_and_streams(tmp_path: Path, transport: str) -> None:
    RepoBuilder(tmp_path).tiny("tiny")
    with run_server(tmp_path, extra_args=["--grpc-transport", transport]) as server:
        assert f"({transport} transport)" in server.output()
        with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
            assert client.is_server_live()
            result = client.infer("tiny", [tiny_input()])
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), X + 1)
            answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
            client.start_stream(callback=lambda result, error: answers.put(error or result))
            for i in range(5):
                client.async_stream_infer("tiny", [tiny_input()], request_id=str(i))
            got = sorted(answers.get(timeout=20).get_response().id for _ in range(5))
            client.stop_stream()
            assert got == [str(i) for i in range(5)]
        assert server.stop() == 0


def test_sigterm_sends_goaway_and_drains_the_running_call(tmp_path: Path) -> None:
    RepoBuilder(tmp_path).run_logging_model("runs", queue=4)
    runs = RunLog(tmp_path, "runs")
    with run_server(tmp_path) as server, RawClient(server.grpc_port) as client:
        stream_id = client.headers("ModelInfer")
        client.data(stream_id, grpc_message(runs_request(b"slow", 1.0)))
        runs.wait_for("slow")
        server.process.send_signal(signal.SIGTERM)
        answer = client.until_closed(stream_id)
        assert answer.status() == 0, answer.message()
        frames = client.until_eof()
        goaways = [struct.unpack(">II", f.payload[:8]) for f in frames if f.kind == GOAWAY]
        # First "no stream refused yet" (2^31 - 1), then the last stream the server took.
        assert goaways[0] == (2**31 - 1, 0)
        assert goaways[-1] == (stream_id, 0)
        assert server.process.wait(30) == 0


def test_tls_negotiates_h2(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    RepoBuilder(tmp_path / "models").tiny("tiny")
    context = ssl.create_default_context(cafile=str(cert))
    args = ["--tls-cert", str(cert), "--tls-key", str(key)]
    with run_server(tmp_path / "models", extra_args=args, ssl_context=context) as server:
        client_context = ssl.create_default_context(cafile=str(cert))
        client_context.set_alpn_protocols(["h2"])
        with (
            socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10) as raw,
            client_context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            assert tls.selected_alpn_protocol() == "h2"
            tls.sendall(PREFACE + frame(SETTINGS, 0, 0))
            header = tls.recv(9)
            assert header[3] == SETTINGS
        with grpcclient.InferenceServerClient(
            f"127.0.0.1:{server.grpc_port}", ssl=True, root_certificates=str(cert)
        ) as triton:
            result = triton.infer("tiny", [tiny_input()])
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), X + 1)
