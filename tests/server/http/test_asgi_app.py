"""The embeddable ASGI app (``conveyor/server/http/asgi.py``), driven in-process.

``conveyor serve`` runs its own front end; this app is for users who mount Conveyor in
their own ASGI server. Here it is called as an ASGI server would call it (a scope, a
``receive`` and a ``send``), over a real engine with the ``tiny`` model, and its answers
are read with tritonclient's own request/response codec. No server process, no socket.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

from conveyor import __version__
from conveyor.engine import Engine
from conveyor.server.auth import BearerAuth
from conveyor.server.dataplane import DataPlane
from conveyor.server.http.asgi import ASGIApp
from conveyor.server.http.routes import V2Routes

LIMIT = 64 * 1024  # max_body_bytes here
TOKEN = "s3cret-token"
CALL_TIMEOUT = 10.0  # no call here may take longer; a hang fails instead of blocking
X = np.arange(16, dtype=np.float32).reshape(1, 16)

Response = tuple[int, dict[bytes, bytes], bytes]


@pytest.fixture(scope="module")
def routes(repository: Path) -> Iterator[V2Routes]:
    engine = Engine.from_repository(repository, model_control="explicit", startup_models=["tiny"])
    try:
        yield V2Routes(DataPlane(engine, version=__version__))
    finally:
        engine.close(5)


@pytest.fixture(scope="module")
def app(routes: V2Routes) -> ASGIApp:
    return ASGIApp(routes, max_body_bytes=LIMIT)


def call(
    app: ASGIApp,
    method: str,
    path: str,
    body: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    pieces: list[bytes] | None = None,
    endless: bool = False,
) -> Response:
    """One request through ``app``: the body in one message (or ``pieces``); with
    ``endless`` the client never finishes sending, so reading the body would hang."""
    chunks = list(pieces) if pieces is not None else [body]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"test"), *(headers or [])],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if chunks:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks) or endless}
        await asyncio.Event().wait()  # the client sends nothing more
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, receive, send), CALL_TIMEOUT))
    start, body_message = sent
    assert start["type"] == "http.response.start" and body_message["type"] == "http.response.body"
    return start["status"], dict(start["headers"]), body_message["body"]


def error_of(response: Response) -> str:
    return str(json.loads(response[2])["error"])


def test_health_and_metadata(app: ASGIApp) -> None:
    assert call(app, "GET", "/v2/health/live")[0] == 200
    assert call(app, "GET", "/v2/health/ready")[0] == 200
    status, headers, body = call(app, "GET", "/v2")
    assert status == 200 and headers[b"content-type"] == b"application/json"
    assert json.loads(body)["name"] == "conveyor"
    assert headers[b"content-length"] == b"%d" % len(body)
    status, _, body = call(app, "GET", "/v2/models/tiny")
    assert status == 200 and json.loads(body)["inputs"][0]["name"] == "INPUT0"


def test_json_infer(app: ASGIApp) -> None:
    request = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16],
                           "data": X.ravel().tolist()}]}  # fmt: skip
    status, _, body = call(app, "POST", "/v2/models/tiny/infer", json.dumps(request).encode())
    assert status == 200, body
    output = json.loads(body)["outputs"][0]
    assert output["name"] == "OUTPUT0" and output["shape"] == [1, 16]
    np.testing.assert_array_equal(np.array(output["data"], np.float32).reshape(1, 16), X + 1)


def test_binary_infer_as_tritonclient_encodes_it(app: ASGIApp) -> None:
    tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(X, binary_data=True)
    wanted = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)]
    body, json_size = httpclient.InferenceServerClient.generate_request_body([tensor], wanted)
    headers = [(b"inference-header-content-length", b"%d" % json_size)]
    # In two pieces, as a server streaming the body would deliver it.
    status, answer_headers, answer = call(
        app, "POST", "/v2/models/tiny/infer", headers=headers, pieces=[body[:10], body[10:]]
    )
    assert status == 200, answer
    length = int(answer_headers[b"inference-header-content-length"])
    result = httpclient.InferenceServerClient.parse_response_body(answer, header_length=length)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), X + 1)


def test_errors_name_what_was_wrong(app: ASGIApp) -> None:
    status, _, body = call(app, "GET", "/v2/models/nope")
    assert status == 404 and "nope" in error_of((status, {}, body))
    response = call(app, "POST", "/v2/models/tiny/infer", b'{"inputs": 5}')
    assert response[0] == 400 and "'inputs' must be a list" in error_of(response)
    status, headers, body = call(app, "GET", "/v2/models/tiny/infer")
    assert status == 405 and headers[b"allow"] == b"POST"
    assert "takes POST, not GET" in error_of((status, {}, body))


def test_a_body_over_the_limit_is_refused_unread_and_the_connection_closed(app: ASGIApp) -> None:
    headers = [(b"content-length", b"%d" % (LIMIT + 1))]
    # Refused from Content-Length alone: the body (which never comes) is not awaited.
    response = call(app, "POST", "/v2/models/tiny/infer", headers=headers, endless=True)
    assert response[0] == 400 and f"the limit is {LIMIT} bytes" in error_of(response)
    assert response[1][b"connection"] == b"close"
    # Chunked (no length): refused as the pieces pass the limit, still before the end.
    chunked = [(b"transfer-encoding", b"chunked")]
    pieces = [b"x" * 8192] * 9
    response = call(
        app, "POST", "/v2/models/tiny/infer", headers=chunked, pieces=pieces, endless=True
    )
    assert response[0] == 400 and f"more than {LIMIT} bytes" in error_of(response)
    assert response[1][b"connection"] == b"close"


def test_a_body_the_route_never_reads_is_not_read_either(app: ASGIApp) -> None:
    # An unknown route is answered from the headers alone, and the connection is marked to
    # close rather than left reading a body nobody wants (here one that never ends).
    headers = [(b"transfer-encoding", b"chunked")]
    status, answer_headers, _ = call(
        app, "POST", "/v2/nowhere", headers=headers, pieces=[b"x" * 100], endless=True
    )
    assert status == 404
    assert answer_headers[b"connection"] == b"close"
    # A route that reads its whole body leaves the connection open for the next request.
    response = call(app, "POST", "/v2/models/tiny/infer", b'{"inputs": 5}')
    assert b"connection" not in response[1]


def test_a_client_that_leaves_gets_no_answer(app: ASGIApp) -> None:
    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "method": "POST", "path": "/v2/models/tiny/infer",
             "headers": [(b"content-length", b"10")]}  # fmt: skip

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, receive, send), CALL_TIMEOUT))
    assert sent == []


def test_the_bearer_token_guards_all_but_health(routes: V2Routes) -> None:
    app = ASGIApp(routes, max_body_bytes=LIMIT, auth=BearerAuth(TOKEN))
    assert call(app, "GET", "/v2/health/ready")[0] == 200
    status, headers, _ = call(app, "GET", "/v2/models/tiny")
    assert status == 401 and headers[b"www-authenticate"].startswith(b"Bearer")
    # Refused before its body is read: the body never comes, and the connection closes.
    length = [(b"content-length", b"100")]
    status, headers, _ = call(app, "POST", "/v2/models/tiny/infer", headers=length, endless=True)
    assert status == 401 and headers[b"connection"] == b"close"
    good = [(b"authorization", f"Bearer {TOKEN}".encode())]
    assert call(app, "GET", "/v2/models/tiny", headers=good)[0] == 200
