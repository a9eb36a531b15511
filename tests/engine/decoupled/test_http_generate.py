"""The generate extension over HTTP: /generate (one JSON answer) and /generate_stream (SSE)."""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.testing import RunningServer, run_server
from tests.engine.decoupled.models import CHARGEN, build
from tests.polling import wait_until


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = build(tmp_path_factory.mktemp("http_streaming"))
    shutil.copytree(CHARGEN, root / "chargen")
    return root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[RunningServer]:
    with run_server(repository) as running:
        yield running


def post(server: RunningServer, path: str, body: object) -> socket.socket:
    """Send one POST on a raw socket; return the socket to read the answer as it comes."""
    sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=20)
    payload = json.dumps(body).encode()
    sock.sendall(
        b"POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(payload), payload)
    )
    return sock


def read_events(sock: socket.socket) -> Iterator[tuple[float, dict]]:
    """Each SSE ``data:`` event as it arrives, time-stamped; the head is checked first."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        buffer += sock.recv(65536)
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"text/event-stream" in head and b"transfer-encoding: chunked" in head.lower()
    while True:
        while b"\r\n" not in buffer:
            buffer += sock.recv(65536)
        size_line, buffer = buffer.split(b"\r\n", 1)
        size = int(size_line, 16)
        while len(buffer) < size + 2:
            buffer += sock.recv(65536)
        chunk, buffer = buffer[:size], buffer[size + 2 :]
        if size == 0:
            return
        for event in chunk.split(b"\n\n"):
            if event.startswith(b"data: "):
                yield time.monotonic(), json.loads(event[len(b"data: ") :])


def test_generate_stream_sends_each_token_as_it_is_produced(server: RunningServer):
    with post(server, "/v2/models/chargen/generate_stream", {"text_input": "hello"}) as sock:
        events = list(read_events(sock))
    assert "".join(e["text_output"] for _, e in events) == "hello"
    assert all(e["model_name"] == "chargen" and e["model_version"] == "1" for _, e in events)
    # Four 50 ms pauses between the five characters: they arrived spread out, not at once.
    assert events[-1][0] - events[0][0] >= 0.15


def test_generate_stream_with_a_version_in_the_path(server: RunningServer):
    path = "/v2/models/repeat/versions/1/generate_stream"
    with post(server, path, {"COUNT": 3, "DELAY_MS": 0}) as sock:
        assert [e["OUT"] for _, e in read_events(sock)] == [0, 1, 2]


def test_generate_answers_one_json_object(server: RunningServer):
    with post(server, "/v2/models/chargen/generate", {"text_input": "hi", "stream": False}) as s:
        answer = _body(s)
    assert json.loads(answer) == {
        "model_name": "chargen",
        "model_version": "1",
        "text_output": "hi",
    }


def test_generate_refuses_a_model_that_sends_many(server: RunningServer):
    with post(server, "/v2/models/chargen/generate", {"text_input": "hi"}) as sock:
        status, body = _status_and_body(sock)
    assert status == 400 and "use generate_stream" in json.loads(body)["error"]


def test_generate_names_an_unknown_field(server: RunningServer):
    with post(server, "/v2/models/chargen/generate_stream", {"prompt": "hi"}) as sock:
        status, body = _status_and_body(sock)
    assert status == 400
    assert "'prompt' is not an input of model 'chargen'" in json.loads(body)["error"]


def test_a_client_that_leaves_stops_the_model(server: RunningServer, repository: Path):
    progress = repository / "repeat" / "1" / "progress"
    progress.write_text("")
    sock = post(server, "/v2/models/repeat/generate_stream", {"COUNT": 100_000, "DELAY_MS": 5})
    next(read_events(sock))
    sock.close()
    wait_until(lambda: progress.read_text().startswith("closed at"), timeout=20)


def _body(sock: socket.socket) -> bytes:
    return _status_and_body(sock)[1]


def _status_and_body(sock: socket.socket) -> tuple[int, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split()[1]), body
