"""Security: bearer-token auth (HTTP, gRPC, metrics), TLS, and model names that try to
climb out of the repository. Each against a real server process."""

from __future__ import annotations

import gc
import json
import os
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.server.settings import AUTH_TOKEN_ENV, Settings
from conveyor.testing import RunningServer, run_server
from tests.models import RUN_LOGGING_MODEL, RepoBuilder
from tests.reliability.rel_util import build_repository, raw_exchange, self_signed

TOKEN = "s3cret-Token_for.tests"
GOOD = {"Authorization": f"Bearer {TOKEN}"}
X = np.arange(16, dtype=np.float32).reshape(1, 16)


def http_call(
    url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    request = urllib.request.Request(url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def http_infer(host_port: str, **kwargs) -> np.ndarray:  # type: ignore[no-untyped-def]
    headers = kwargs.pop("headers", None)
    client = httpclient.InferenceServerClient(host_port, **kwargs)
    try:
        x = httpclient.InferInput("INPUT0", [1, 16], "FP32")
        x.set_data_from_numpy(X)
        return client.infer("tiny", [x], headers=headers).as_numpy("OUTPUT0")
    finally:
        client.close()
        del client
        gc.collect()  # tritonclient's __del__ must run on this thread (gevent)


def grpc_infer(address: str, **kwargs) -> np.ndarray:  # type: ignore[no-untyped-def]
    headers = kwargs.pop("headers", None)
    with grpcclient.InferenceServerClient(address, **kwargs) as client:
        x = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
        x.set_data_from_numpy(X)
        return client.infer("tiny", [x], headers=headers).as_numpy("OUTPUT0")


# -- settings ----------------------------------------------------------------------------


def test_the_token_comes_from_the_option_or_the_environment_never_at_import() -> None:
    assert Settings().auth_token is None
    assert Settings().with_environment({AUTH_TOKEN_ENV: "abc"}).auth_token == "abc"
    # The option wins over the environment; an empty variable means no token.
    assert Settings(auth_token="x").with_environment({AUTH_TOKEN_ENV: "y"}).auth_token == "x"
    assert Settings().with_environment({AUTH_TOKEN_ENV: ""}).auth_token is None
    assert TOKEN not in repr(Settings(auth_token=TOKEN))
    for bad in ("", "has space", "é"):
        with pytest.raises(ValueError, match="token"):
            Settings(auth_token=bad)
    with pytest.raises(ValueError, match="together"):
        Settings(tls_cert="cert.pem")


# -- bearer token ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    repository = build_repository(tmp_path_factory.mktemp("auth"))
    # The token from the environment (kept off the command line, where `ps` shows it).
    env = {**os.environ, AUTH_TOKEN_ENV: TOKEN}
    with run_server(repository, env=env) as server:
        yield server
        assert server.process.poll() is None


PROTECTED = [
    ("GET", "/v2"),
    ("GET", "/v2/models/tiny"),
    ("GET", "/v2/models/tiny/ready"),
    ("GET", "/v2/models/tiny/config"),
    ("GET", "/v2/models/stats"),
    ("POST", "/v2/repository/index"),
    ("POST", "/v2/models/tiny/infer"),
    ("GET", "/v2/no/such/route"),
]


def test_health_stays_open_everything_else_needs_the_token(auth_server: RunningServer) -> None:
    url = auth_server.http_url
    for path in ("/v2/health/live", "/v2/health/ready"):
        assert http_call(url, "GET", path)[0] == 200
    body = json.dumps(
        {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                     "data": X.ravel().tolist()}]}
    ).encode()  # fmt: skip
    for method, path in PROTECTED:
        data = body if method == "POST" else None
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                        {"Authorization": f"Basic {TOKEN}"}):  # fmt: skip
            status, response_headers, answer = http_call(url, method, path, data, headers)
            assert status == 401, (method, path, headers, answer)
            assert "bearer token" in json.loads(answer)["error"]
            assert response_headers.get("www-authenticate", "").startswith("Bearer")
        status, _, answer = http_call(url, method, path, data, GOOD)
        assert status != 401, (method, path, answer)
    # The scheme is case-insensitive; the token is not.
    assert http_call(url, "GET", "/v2", headers={"authorization": f"bearer {TOKEN}"})[0] == 200
    bad_case = {"Authorization": f"Bearer {TOKEN.upper()}"}
    assert http_call(url, "GET", "/v2", headers=bad_case)[0] == 401
    # Metrics too.
    assert http_call(auth_server.metrics_url, "GET", "")[0] == 401
    assert http_call(auth_server.metrics_url, "GET", "", headers=GOOD)[0] == 200


def test_tritonclient_http_sends_the_token(auth_server: RunningServer) -> None:
    host_port = auth_server.http_url.removeprefix("http://")
    np.testing.assert_array_equal(http_infer(host_port, headers=GOOD), X + 1)
    with pytest.raises(InferenceServerException) as error:
        http_infer(host_port)
    assert error.value.status() == "401"


def test_an_unauthenticated_body_is_never_read(auth_server: RunningServer) -> None:
    # 1 GB announced, nothing sent: the 401 comes at once, and the connection is closed.
    head = b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"
    answer = raw_exchange(auth_server.http_port, head, timeout=5)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_tritonclient_grpc_sends_the_token(auth_server: RunningServer) -> None:
    address = auth_server.grpc_url.removeprefix("grpc://")
    good = {"authorization": f"Bearer {TOKEN}"}
    np.testing.assert_array_equal(grpc_infer(address, headers=good), X + 1)
    with grpcclient.InferenceServerClient(address) as client:
        assert client.is_server_live() and client.is_server_ready()  # health stays open
        for headers in (None, {"authorization": "Bearer nope"}):
            for call in (
                lambda h=headers: client.get_server_metadata(headers=h),
                lambda h=headers: client.is_model_ready("tiny", headers=h),
                lambda h=headers: client.get_model_repository_index(headers=h),
            ):
                with pytest.raises(InferenceServerException) as error:
                    call()
                assert error.value.status() == "StatusCode.UNAUTHENTICATED"
        with pytest.raises(InferenceServerException) as error:
            grpc_infer(address)
        assert error.value.status() == "StatusCode.UNAUTHENTICATED"


def _collect(into: list, result, error) -> None:  # type: ignore[no-untyped-def]
    into.append((result, error))


def test_grpc_stream_needs_the_token(auth_server: RunningServer) -> None:
    address = auth_server.grpc_url.removeprefix("grpc://")
    x = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    x.set_data_from_numpy(X)
    for headers, expect_ok in ((None, False), ({"authorization": f"Bearer {TOKEN}"}, True)):
        results: list = []
        with grpcclient.InferenceServerClient(address) as client:
            client.start_stream(partial(_collect, results), headers=headers)
            try:
                client.async_stream_infer("tiny", [x])
            except InferenceServerException:
                assert not expect_ok  # refused so fast the stream was already closed
            client.stop_stream()
        assert len(results) == 1
        result, error = results[0]
        if expect_ok:
            assert error is None
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), X + 1)
        else:
            assert error is not None and "UNAUTHENTICATED" in str(error.status())


# -- TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


def test_tls_on_http_grpc_and_metrics(certificate: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = certificate
    repository = build_repository(tmp_path / "models")
    context = ssl.create_default_context(cafile=str(cert))
    args = ["--tls-cert", str(cert), "--tls-key", str(key), "--auth-token", TOKEN]
    with run_server(repository, extra_args=args, ssl_context=context) as server:
        assert server.http_url.startswith("https://")
        # HTTP: tritonclient over https, verifying our certificate, with the token.
        host_port = server.http_url.removeprefix("https://")
        result = http_infer(
            host_port,
            headers=GOOD,
            ssl=True,
            ssl_context_factory=lambda: ssl.create_default_context(cafile=str(cert)),
        )
        np.testing.assert_array_equal(result, X + 1)
        # Plain HTTP on the TLS port gets no HTTP answer.
        answer = raw_exchange(server.http_port, b"GET /v2/health/live HTTP/1.1\r\n\r\n", 5)
        assert not answer.startswith(b"HTTP/1.1 200")
        # A client that does not trust the certificate refuses the server.
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(server.http_url + "/v2/health/live", timeout=5)
        # gRPC over TLS with the certificate as root; plaintext gRPC fails.
        address = server.grpc_url.removeprefix("grpc://")
        result = grpc_infer(
            address,
            ssl=True,
            root_certificates=str(cert),
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        np.testing.assert_array_equal(result, X + 1)
        with grpc.insecure_channel(address) as channel, pytest.raises(grpc.FutureTimeoutError):
            grpc.channel_ready_future(channel).result(timeout=1)
        # Metrics over https, with the token.
        assert http_call(server.metrics_url, "GET", "", headers=GOOD, context=context)[0] == 200
        assert server.stop() == 0


def test_tls_refuses_a_key_that_does_not_match(
    certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    cert, _ = certificate
    _, other_key = self_signed(tmp_path)
    repository = build_repository(tmp_path / "models")
    args = ["--tls-cert", str(cert), "--tls-key", str(other_key)]
    with run_server(repository, extra_args=args, wait=False) as server:
        assert server.process.wait(30) == 1
        assert "TLS" in server.output()


# -- path traversal ----------------------------------------------------------------------

HOSTILE_NAMES = [
    "..", ".", "../evil", "..%2Fevil", "%2e%2e", "%2E%2E%2Fevil", "tiny%2F..%2F..%2Fevil",
    "%00", "evil%00", "tiny%0A", "%2Fetc%2Fpasswd", "~", ".hidden", "a" * 300, "%C0%AE%C0%AE",
]  # fmt: skip


@pytest.fixture(scope="module")
def traversal_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RunningServer, Path]]:
    root = tmp_path_factory.mktemp("traversal")
    repository = build_repository(root / "models")
    # A model just outside the repository that leaves a mark if it is ever loaded.
    RepoBuilder(root).python(
        "evil", RUN_LOGGING_MODEL.replace("class Model:", EVIL_LOAD), "backend='python'"
    )
    args = ["--model-control", "explicit", "--load-model", "tiny"]
    with run_server(repository, extra_args=args) as server:
        yield server, root
        assert server.process.poll() is None


EVIL_LOAD = """
(Path(__file__).parent.parent.parent / "EVIL_LOADED").write_text("loaded")

class Model:"""


def test_model_names_never_leave_the_repository(
    traversal_server: tuple[RunningServer, Path],
) -> None:
    server, root = traversal_server
    url = server.http_url
    for name in HOSTILE_NAMES:
        routes = [
            ("GET", f"/v2/models/{name}"),
            ("GET", f"/v2/models/{name}/ready"),
            ("GET", f"/v2/models/{name}/config"),
            ("GET", f"/v2/models/{name}/stats"),
            ("GET", f"/v2/models/{name}/versions/1"),
            ("POST", f"/v2/models/{name}/infer"),
            ("POST", f"/v2/models/{name}/versions/1/infer"),
            ("POST", f"/v2/repository/models/{name}/load"),
            ("POST", f"/v2/repository/models/{name}/unload"),
        ]
        for method, path in routes:
            status, _, body = http_call(url, method, path, b"{}" if method == "POST" else None)
            assert 400 <= status < 500, (method, path, status, body)
            assert "error" in json.loads(body)
    with grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://")) as client:
        for name in ["..", "../evil", "../models/../evil", "/etc", "evil\x00", "tiny\n", "a" * 300]:
            for call in (client.load_model, client.unload_model, client.get_model_metadata,
                         client.get_model_config):  # fmt: skip
                with pytest.raises(InferenceServerException) as error:
                    call(name)
                assert error.value.status() in (
                    "StatusCode.NOT_FOUND", "StatusCode.INVALID_ARGUMENT"
                ), (name, call, error.value)  # fmt: skip
            assert not client.is_model_ready(name)
        assert client.is_model_ready("tiny")  # and the server still serves
    assert not (root / "EVIL_LOADED").exists()
    assert http_call(url, "GET", "/v2/models/tiny/ready")[0] == 200


def test_raw_dot_segments_in_the_request_line(traversal_server: tuple[RunningServer, Path]) -> None:
    server, root = traversal_server
    targets = (
        b"/v2/repository/models/../load",
        b"/v2/repository/models/%2e%2e/load",
        b"/v2/models/../../evil/infer",
        b"/v2/repository/models/..%5cevil/load",
    )
    for target in targets:
        request = b"POST " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
        answer = raw_exchange(server.http_port, request + b"Connection: close\r\n\r\n")
        assert answer.split(b" ")[1][:1] == b"4", (target, answer[:200])
    assert not (root / "EVIL_LOADED").exists()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=5):
        pass  # still accepting
