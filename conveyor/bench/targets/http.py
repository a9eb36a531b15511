"""V2 over HTTP/REST: one request built once by ``conveyor.protocol``, sent as is.

The body comes from the same encoder the project's HTTP client uses (the binary tensor
extension, or plain JSON); the bench adds only the request line and headers, so the
generator's cost per request is a socket write and a response parse, never a tensor encode.
The control side (metadata, config, statistics) is the project's HTTP client. Config and
statistics are optional: a V2 server without Triton's extensions (MLServer) answers them
with an error, and the bench then reports no batch size and no server-side split.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

import numpy as np

from conveyor.bench.inputs import ModelSpec
from conveyor.bench.server_stats import StatsTotals
from conveyor.bench.targets.base import Client, Control, RequestFailed, TargetSpec
from conveyor.bench.targets.http_conn import ConnectionPool
from conveyor.client import Client as V2Client
from conveyor.protocol import infer
from conveyor.protocol.binary import HEADER_LENGTH_HEADER


def model_path(spec: TargetSpec) -> str:
    path = f"/v2/models/{quote(spec.model, safe='')}"
    return f"{path}/versions/{quote(spec.version, safe='')}" if spec.version else path


class HttpControl(Control):
    """Metadata, config and statistics through ``conveyor.client`` (HTTP), between points."""

    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec
        self._client = V2Client(spec.url, call_timeout=spec.timeout_s)
        self._version = spec.version or None

    def describe(self) -> ModelSpec:
        try:
            metadata = self._client.model_metadata(self.spec.model, self._version)
        except Exception as exc:  # whatever the transport raised, name the model and server
            raise RequestFailed(f"{self.spec.url}: model {self.spec.model!r}: {exc}") from None
        return ModelSpec.from_metadata(metadata, self._max_batch_size())

    def _max_batch_size(self) -> int | None:
        try:
            config = self._client.model_config(self.spec.model, self._version)
        except Exception:  # no config extension (MLServer): the batch size is unknown
            return None
        # Triton's HTTP answer nests the config under "config" in some versions.
        value = config.get("max_batch_size", config.get("config", {}).get("max_batch_size"))
        return int(value) if value is not None else None

    def statistics(self) -> StatsTotals | None:
        try:
            body = self._client.statistics(self.spec.model, self._version)
        except Exception:  # no usable statistics: report none
            return None
        return StatsTotals.from_json(body, self.spec.model, self.spec.version)

    def close(self) -> None:
        self._client.close()


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
