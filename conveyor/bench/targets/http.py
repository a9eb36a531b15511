"""V2 over HTTP/REST: metadata, config and statistics by urllib; inference by ``http_conn``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from urllib.parse import quote

import numpy as np

from conveyor.bench.inputs import ModelSpec
from conveyor.bench.server_stats import StatsTotals
from conveyor.bench.targets.base import Client, Control, RequestFailed, TargetSpec
from conveyor.bench.targets.http_conn import ConnectionPool
from conveyor.bench.targets.http_wire import binary_body, json_body


def model_path(spec: TargetSpec) -> str:
    path = f"/v2/models/{quote(spec.model, safe='')}"
    return f"{path}/versions/{quote(spec.version, safe='')}" if spec.version else path


class HttpControl(Control):
    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec
        host, port = spec.address
        self.base = f"http://{host}:{port}"

    def _get(self, path: str) -> dict | None:
        """The JSON answer, or None when the server has no such route (404 / 405 / 501)."""
        try:
            with urllib.request.urlopen(self.base + path, timeout=self.spec.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405, 501):
                return None
            raise RequestFailed(f"GET {path}: HTTP {exc.code}: {exc.read()[:500]!r}") from None

    def describe(self) -> ModelSpec:
        metadata = self._get(model_path(self.spec))
        if metadata is None:
            raise RequestFailed(f"{self.base}: no model {self.spec.model!r}")
        config = self._get(model_path(self.spec) + "/config")
        max_batch = None
        if isinstance(config, dict):  # Triton nests it under "config" in some versions
            value = config.get("max_batch_size", config.get("config", {}).get("max_batch_size"))
            max_batch = int(value) if value is not None else None
        return ModelSpec.from_metadata(metadata, max_batch)

    def statistics(self) -> StatsTotals | None:
        try:
            body = self._get(model_path(self.spec) + "/stats")
        except (RequestFailed, OSError, ValueError):  # no usable statistics: report none
            return None
        if not isinstance(body, dict):
            return None
        return StatsTotals.from_json(body, self.spec.model, self.spec.version)


def build_request(spec: TargetSpec, inputs: Mapping[str, np.ndarray],
                  declared: Mapping[str, str]) -> bytes:
    """The whole HTTP request (head and body) for one inference, built once."""
    host, port = spec.address
    if spec.encoding == "binary":
        body, header_length = binary_body(inputs, declared)
        extra = f"Inference-Header-Content-Length: {header_length}\r\n"
        content_type = "application/octet-stream"
    elif spec.encoding == "json":
        body = json_body(inputs, declared)
        extra = ""
        content_type = "application/json"
    else:
        raise ValueError(f"HTTP encoding must be binary or json, got {spec.encoding!r}")
    head = (
        f"POST {model_path(spec)}/infer HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode("latin-1") + body


class HttpClient(Client):
    def __init__(self, spec: TargetSpec, inputs: Mapping[str, np.ndarray],
                 declared: Mapping[str, str]) -> None:
        self._request = build_request(spec, inputs, declared)
        self._pool = ConnectionPool(*spec.address)

    async def infer(self) -> None:
        status, body = await self._pool.request(self._request)
        if status != 200:
            raise RequestFailed(f"HTTP {status}: {body[:300].decode('utf-8', 'replace')}")

    async def close(self) -> None:
        self._pool.close()
