"""HTTP/1.1 on the wire: keep-alive, pipelining, 100-continue, HEAD, HTTP/1.0, bad input."""

from __future__ import annotations

import json
import socket

import numpy as np

from conveyor.testing import RunningServer

INFER = json.dumps(
    {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [1.0] * 16}]}
).encode()


def connect(server: RunningServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.http_port), timeout=10)


class Reader:
    """Reads whole responses (Content-Length bodies) off a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def response(self, head_only: bool = False) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            assert self._fill(), f"connection closed: {self.buffer!r}"
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = 0 if head_only or status == 100 else int(headers.get("content-length", 0))
        while len(self.buffer) < length:
            assert self._fill(), "connection closed mid-body"
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        try:
            return not self.buffer and not self._fill()
        except ConnectionResetError:
            return True


def post(path: str, body: bytes, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode()
        + body
    )


def test_keep_alive_serves_many_requests_on_one_connection(server: RunningServer) -> None:
    with connect(server) as sock:
        reader = Reader(sock)
        for _ in range(5):
            sock.sendall(post("/v2/models/tiny/infer", INFER))
            status, headers, body = reader.response()
            assert status == 200
            assert json.loads(body)["outputs"][0]["data"] == [2.0] * 16
            assert headers.get("connection") != "close"
        sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: t\r\n\r\n")
        assert reader.response()[0] == 200


def test_pipelined_requests_are_answered_in_order(server: RunningServer) -> None:
    requests = [
        post("/v2/models/sleep/infer", json.dumps(
            {"id": "slow", "inputs": [
                {"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [0.2]}]}
        ).encode()),
        b"GET /v2/models/tiny HTTP/1.1\r\nHost: t\r\n\r\n",
        post("/v2/models/tiny/infer", INFER),
    ]  # fmt: skip
    with connect(server) as sock:
        sock.sendall(b"".join(requests))
        reader = Reader(sock)
        first, second, third = (reader.response() for _ in range(3))
    assert json.loads(first[2])["id"] == "slow"
    assert json.loads(second[2])["name"] == "tiny"
    assert json.loads(third[2])["outputs"][0]["data"] == [2.0] * 16


def test_expect_100_continue(server: RunningServer) -> None:
    with connect(server) as sock:
        reader = Reader(sock)
        sock.sendall(
            b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % len(INFER)
        )
        assert reader.response()[0] == 100
        sock.sendall(INFER)
        assert reader.response()[0] == 200


def test_head_gets_headers_only(server: RunningServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"HEAD /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
        reader = Reader(sock)
        status, _, _ = reader.response(head_only=True)
        assert status == 200  # a GET route takes HEAD (RFC 9110), and no body follows
        assert reader.response()[0] == 200


def test_http_1_0_closes_after_the_response(server: RunningServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.0\r\n\r\n")
        reader = Reader(sock)
        assert reader.response()[0] == 200
        assert reader.closed()


def test_connection_close_is_honoured(server: RunningServer) -> None:
    with connect(server) as sock:
        sock.sendall(post("/v2/models/tiny/infer", INFER, "Connection: close\r\n"))
        reader = Reader(sock)
        status, headers, _ = reader.response()
        assert status == 200 and headers["connection"] == "close"
        assert reader.closed()


def test_malformed_http_gets_400_and_the_server_lives(server: RunningServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        reader = Reader(sock)
        status, _, _ = reader.response()
        assert status == 400
    with connect(server) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
        assert Reader(sock).response()[0] == 200


def test_binary_response_on_the_wire(server: RunningServer) -> None:
    value = np.arange(16, dtype=np.float32).reshape(1, 16)
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [1, 16],
                    "parameters": {"binary_data_size": 64},
                }
            ],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    with connect(server) as sock:
        sock.sendall(
            post(
                "/v2/models/tiny/infer",
                header + value.tobytes(),
                f"Inference-Header-Content-Length: {len(header)}\r\n",
            )
        )
        status, headers, body = Reader(sock).response()
    assert status == 200
    length = int(headers["inference-header-content-length"])
    meta = json.loads(body[:length])
    assert meta["outputs"][0]["parameters"]["binary_data_size"] == 64
    assert np.frombuffer(body[length:], np.float32).tolist() == (value + 1).ravel().tolist()
