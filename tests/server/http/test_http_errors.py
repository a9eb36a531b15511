"""Every malformed request gets a 4xx with {"error": ...} naming the problem; the server lives."""

from __future__ import annotations

import gzip
import json
import socket
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer, run_server
from tests.server.http.http_util import request

FP32_16 = {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16}


def infer_json(server: RunningServer, model: str, body: object, **headers: str):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, response_headers, response = request(
        server.http_url, "POST", f"/v2/models/{model}/infer", data, headers
    )
    assert response_headers.get("content-type") == "application/json"
    return status, json.loads(response)["error"] if status != 200 else json.loads(response)


@pytest.mark.parametrize(
    ("model", "body", "status", "message"),
    [
        ("tiny", b"{not json", 400, "not valid JSON"),
        ("tiny", b"", 400, "not valid JSON"),
        ("tiny", {"inputs": "x"}, 400, "'inputs' must be a list"),
        ("no_such_model", {"inputs": [FP32_16]}, 404, "'no_such_model' is not in the repository"),
        ("tiny/versions/4", {"inputs": [FP32_16]}, 404, "has no version 4"),
        ("tiny", {"inputs": [FP32_16, {**FP32_16, "name": "BOGUS"}]}, 400, "no input 'BOGUS'"),
        ("tiny", {"inputs": []}, 400, "missing input 'INPUT0'"),
        (
            "tiny",
            {"inputs": [{**FP32_16, "datatype": "INT32", "data": [0] * 16}]},
            400,
            "expected FP32",
        ),
        ("tiny", {"inputs": [{**FP32_16, "shape": [1, 15]}]}, 400, "needs 15 elements"),
        ("tiny", {"inputs": [{**FP32_16, "shape": [1, 8], "data": [0.0] * 8}]}, 400, "shape"),
        ("tiny", {"inputs": [{**FP32_16, "datatype": "FP99"}]}, 400, "unknown datatype"),
        ("tiny", {"inputs": [FP32_16], "outputs": [{"name": "NOPE"}]}, 400, "no output 'NOPE'"),
        ("tiny", {"inputs": [FP32_16], "parameters": {"priority": -3}}, 400, "'priority'"),
        (
            "tiny",
            {"inputs": [FP32_16], "parameters": {"sequence_id": 5, "sequence_start": 1}},
            400,
            "'sequence_start' must be true or false",
        ),
        (
            "tiny",
            {"inputs": [{**FP32_16, "parameters": {"shared_memory_region": "r"}}]},
            400,
            "shared memory",
        ),
    ],
)
def test_bad_requests(server: RunningServer, model, body, status, message) -> None:
    got, error = infer_json(server, model, body)
    assert got == status
    assert message in error


def binary_body(shape: list[int], declared: int, actual: int, header_length_delta: int = 0):
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": shape,
                    "parameters": {"binary_data_size": declared},
                }
            ]
        }
    ).encode()
    length = str(len(header) + header_length_delta)
    return header + b"\0" * actual, {"Inference-Header-Content-Length": length}


@pytest.mark.parametrize(
    ("shape", "declared", "actual", "delta", "message"),
    [
        ([1, 16], 64, 60, 0, "runs past the end"),
        ([1, 16], 64, 70, 0, "add up to 64 bytes but 70 bytes follow"),
        ([1, 16], 60, 60, 0, "needs 64 bytes but binary_data_size is 60"),
        ([1, 4_000_000_000], 64, 64, 0, "needs 16000000000 bytes"),
        ([1, 16], 64, 64, 10_000, "but the body has only"),
        ([1, 16], 64, 64, -3, "not valid JSON"),
    ],
)
def test_binary_sizes_must_add_up(server, shape, declared, actual, delta, message) -> None:
    body, headers = binary_body(shape, declared, actual, delta)
    status, error = infer_json(server, "tiny", body, **headers)
    assert status == 400
    assert message in error


def test_bytes_length_prefix_past_the_end(server: RunningServer) -> None:
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "BYTES",
                    "shape": [1, 1],
                    "parameters": {"binary_data_size": 6},
                }
            ]
        }
    ).encode()
    tail = (1000).to_bytes(4, "little") + b"ab"
    status, error = infer_json(
        server,
        "echo_BYTES",
        header + tail,
        **{"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 400
    assert "length prefix says 1000 bytes but only 2 remain" in error


def test_tritonclient_sees_the_error_message(triton) -> None:
    bad = httpclient.InferInput("INPUT0", [1, 8], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 8), np.float32))
    with pytest.raises(InferenceServerException, match=r"expected \[-1, 16\]") as error:
        triton.infer("tiny", [bad])
    assert error.value.status() == "400"
    with pytest.raises(InferenceServerException, match="not in the repository"):
        triton.infer("missing", [bad])


def test_unsupported_content_encoding(server: RunningServer) -> None:
    status, error = infer_json(server, "tiny", b"xx", **{"Content-Encoding": "br"})
    assert status == 400 and "Content-Encoding 'br' is not supported" in error
    status, error = infer_json(server, "tiny", b"not gzip", **{"Content-Encoding": "gzip"})
    assert status == 400 and "not valid gzip" in error


# -- size limits ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_limit_server(repository) -> RunningServer:
    with run_server(repository, extra_args=["--max-body-bytes", "4096"]) as running:
        yield running


def read_response(sock: socket.socket) -> bytes:
    """One HTTP response with a Content-Length, read off a raw socket."""
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed mid-response: {response!r}"
        response += chunk
    head, _, body = response.partition(b"\r\n\r\n")
    length = int(next(
        line.split(b":")[1] for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ))  # fmt: skip
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-body"
        body += chunk
    return head + b"\r\n\r\n" + body


def test_body_over_the_limit_is_refused_from_content_length(small_limit_server) -> None:
    """A huge Content-Length is answered at once: nothing of that size is read or allocated."""
    with socket.create_connection(("127.0.0.1", small_limit_server.http_port), timeout=10) as s:
        s.sendall(
            b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: 100000000000\r\n\r\n" + b"\0" * 1000
        )
        started = time.monotonic()
        response = read_response(s)
    assert time.monotonic() - started < 5
    assert response.startswith(b"HTTP/1.1 400")
    assert b"connection: close" in response.lower()
    assert b"the limit is 4096 bytes" in response


def test_body_over_the_limit_while_streaming(small_limit_server) -> None:
    """Chunked bodies have no Content-Length: the limit is enforced as they arrive."""
    chunk = b"x" * 1000
    payload = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(10)) + b"0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", small_limit_server.http_port), timeout=10) as s:
        s.sendall(
            b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + payload
        )
        response = read_response(s)
    assert response.startswith(b"HTTP/1.1 400")
    assert b"more than 4096 bytes" in response


def test_compressed_body_over_the_limit(small_limit_server) -> None:
    bomb = gzip.compress(b"\0" * 1_000_000)
    assert len(bomb) < 4096
    status, error = infer_json(small_limit_server, "tiny", bomb, **{"Content-Encoding": "gzip"})
    assert status == 400
    assert "once decompressed" in error


def test_the_server_keeps_serving_after_errors(server: RunningServer) -> None:
    for _ in range(3):
        infer_json(server, "tiny", b"{garbage")
    status, body = infer_json(server, "tiny", {"inputs": [FP32_16]})
    assert status == 200
    assert body["outputs"][0]["data"] == [1.0] * 16
