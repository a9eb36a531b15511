"""Large tensors over HTTP: read straight into one buffer, written back without joins.

Every test checks the bytes that come back, with real clients and raw sockets that split
a body over many TCP writes, pipeline requests, or stop half way.
"""

from __future__ import annotations

import socket
import time

import numpy as np
import orjson
import tritonclient.http as httpclient

from conveyor.protocol import infer
from conveyor.testing import RunningServer
from tests.server.large.large_models import MiB


def _request(inputs: dict[str, np.ndarray], path: str = "/v2/models/identity/infer") -> bytes:
    body, header_length = infer.encode_request(inputs)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
        f"Inference-Header-Content-Length: {header_length}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def _read_response(sock: socket.socket) -> tuple[int, dict, dict[str, np.ndarray]]:
    """One response, read byte-exact (http.client's reader would read ahead past it)."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        assert byte, "the server closed the connection"
        head += byte
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)}
    length = int(headers["content-length"])
    body = bytearray()
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        assert chunk, "the server closed the connection mid-body"
        body += chunk
    status = int(status_line.split()[1])
    if status != 200:
        return status, orjson.loads(body), {}
    header_length = headers.get("inference-header-content-length")
    header, outputs = infer.decode_response(
        bytes(body), int(header_length) if header_length else None
    )
    return status, header, outputs


def _connect(server: RunningServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def test_8_mib_fp32_round_trip_with_tritonclient(large_server: RunningServer) -> None:
    data = np.random.default_rng(0).standard_normal(2 * MiB).astype(np.float32)  # 8 MiB
    client = httpclient.InferenceServerClient(large_server.http_url.removeprefix("http://"))
    try:
        tensor = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
        tensor.set_data_from_numpy(data, binary_data=True)
        result = client.infer("identity", [tensor])
        assert result.as_numpy("OUTPUT0").tobytes() == data.tobytes()
    finally:
        client.close()


def test_large_bytes_tensor_round_trip(large_server: RunningServer) -> None:
    rng = np.random.default_rng(1)
    # 3 MiB over 3,000 elements of arbitrary bytes (not UTF-8): a Python model takes them.
    elements = [rng.bytes(int(n)) for n in rng.integers(0, 2048, 3000)]
    data = np.array(elements, dtype=object)
    client = httpclient.InferenceServerClient(large_server.http_url.removeprefix("http://"))
    try:
        tensor = httpclient.InferInput("INPUT0", [len(elements)], "BYTES")
        tensor.set_data_from_numpy(data, binary_data=True)
        result = client.infer("echo_bytes", [tensor])
        assert list(result.as_numpy("OUTPUT0")) == elements
    finally:
        client.close()


def test_body_split_over_many_tcp_writes(large_server: RunningServer) -> None:
    data = np.arange(MiB // 4 * 3, dtype=np.float32)  # 3 MiB
    message = _request({"INPUT0": data})
    with _connect(large_server) as sock:
        # The head with the body's first bytes, then uneven pieces with pauses, so the
        # server sees the body arrive in many reads of many sizes.
        head_end = message.index(b"\r\n\r\n") + 4
        cuts = [head_end + 100, head_end + 4097, head_end + 70_001, head_end + 1_000_003]
        cuts += list(range(cuts[-1] + 333_333, len(message), 333_333))
        start = 0
        for cut in [*cuts, len(message)]:
            sock.sendall(message[start:cut])
            start = cut
            time.sleep(0.005)
        status, _, outputs = _read_response(sock)
    assert status == 200
    assert outputs["OUTPUT0"].tobytes() == data.tobytes()


def test_pipelined_large_and_small_requests_on_one_connection(
    large_server: RunningServer,
) -> None:
    big = np.arange(MiB // 2, dtype=np.float32) * 0.5  # 2 MiB: read into its own buffer
    small = np.arange(16, dtype=np.float32)
    with _connect(large_server) as sock:
        sock.sendall(_request({"INPUT0": big}) + _request({"INPUT0": small}) * 2)
        answers = [_read_response(sock) for _ in range(3)]
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert answers[0][2]["OUTPUT0"].tobytes() == big.tobytes()
    assert answers[1][2]["OUTPUT0"].tobytes() == small.tobytes()
    assert answers[2][2]["OUTPUT0"].tobytes() == small.tobytes()


def test_content_length_shorter_than_the_tensors_is_answered_400(
    large_server: RunningServer,
) -> None:
    message = _request({"INPUT0": np.zeros(MiB // 4, dtype=np.float32)})  # 1 MiB body
    head, body = message.split(b"\r\n\r\n", 1)
    declared = len(body) - 1000
    head = head.replace(b"Content-Length: %d" % len(body), b"Content-Length: %d" % declared)
    with _connect(large_server) as sock:
        sock.sendall(head + b"\r\n\r\n" + body[:declared])
        status, error, _ = _read_response(sock)
    assert status == 400
    assert "binary_data_size" in error["error"]


def test_client_that_closes_mid_body_leaves_the_server_serving(
    large_server: RunningServer,
) -> None:
    data = np.ones(MiB, dtype=np.float32)
    message = _request({"INPUT0": data})
    for _ in range(3):
        with _connect(large_server) as sock:
            sock.sendall(message[: len(message) // 2])
    with _connect(large_server) as sock:
        sock.sendall(message)
        status, _, outputs = _read_response(sock)
    assert status == 200
    assert outputs["OUTPUT0"].tobytes() == data.tobytes()


def test_non_utf8_element_for_an_onnx_string_input_is_400(large_server: RunningServer) -> None:
    data = np.array([b"fine", b"\xff\xfe", b"also fine"], dtype=object)
    with _connect(large_server) as sock:
        sock.sendall(_request({"INPUT0": data}, "/v2/models/strings/infer"))
        status, error, _ = _read_response(sock)
    assert status == 400
    assert "'INPUT0'" in error["error"]
    assert "element 1" in error["error"]


def test_utf8_strings_round_trip_through_onnxruntime(large_server: RunningServer) -> None:
    data = np.array(["héllo".encode(), b"", "✓".encode() * 1000], dtype=object)
    with _connect(large_server) as sock:
        sock.sendall(_request({"INPUT0": data}, "/v2/models/strings/infer"))
        status, _, outputs = _read_response(sock)
    assert status == 200
    assert list(outputs["OUTPUT0"]) == list(data)
