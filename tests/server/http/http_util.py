"""Raw HTTP for the tests that must say exactly what goes on the wire."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit


def request(
    url: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection: (status, lower-cased headers, body)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        connection.close()


def get_json(url: str, path: str) -> tuple[int, Any]:
    status, _, data = request(url, "GET", path)
    return status, json.loads(data) if data else None


def post_json(url: str, path: str, value: Any = None, **kwargs: Any) -> tuple[int, Any]:
    body = b"" if value is None else json.dumps(value).encode()
    status, _, data = request(url, "POST", path, body, **kwargs)
    return status, json.loads(data) if data else None
