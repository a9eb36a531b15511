"""V2 inference over HTTP/REST: one request built once by ``conveyor.protocol``, sent as is.

The body comes from the same encoder the project's HTTP client uses (the binary tensor
extension, or plain JSON); the bench adds only the request line and headers, so the
generator's cost per request is a socket write and a response parse, never a tensor encode.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

import numpy as np

from conveyor.bench.targets.base import Client, RequestFailed, TargetSpec
from conveyor.bench.targets.http_conn import ConnectionPool
from conveyor.protocol import infer
from conveyor.protocol.binary import HEADER_LENGTH_HEADER


def model_path(spec: TargetSpec) -> str:
    path = f"/v2/models/{quote(spec.model, safe='')}"
    return f"{path}/versions/{quote(spec.version, safe='')}" if spec.version else path


def build_request(spec: TargetSpec, inputs: Mapping[str, np.ndarray]) -> bytes:
    """The whole HTTP request (head and body) for one inference, built once."""
    if spec.encoding not in ("binary", "json"):
        raise ValueError(f"HTTP encoding must be binary or json, got {spec.encoding!r}")
    binary = spec.encoding == "binary"
    body, header_length = infer.encode_request(inputs, binary_data=binary)
    extra = f"{HEADER_LENGTH_HEADER}: {header_length}\r\n" if header_length is not None else ""
    content_type = "application/octet-stream" if binary else "application/json"
    host, port = spec.address
    head = (
        f"POST {model_path(spec)}/infer HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode("latin-1") + body


class HttpClient(Client):
    def __init__(self, spec: TargetSpec, inputs: Mapping[str, np.ndarray]) -> None:
        self._request = build_request(spec, inputs)
        self._pool = ConnectionPool(*spec.address)

    async def infer(self) -> None:
        status, body = await self._pool.request(self._request)
        if status != 200:
            raise RequestFailed(f"HTTP {status}: {body[:300].decode('utf-8', 'replace')}")

    async def close(self) -> None:
        self._pool.close()
