"""Remote clients with the engine's shape: ``submit`` -> future, ``as_completed``, ``await``.

>>> from conveyor.client import Client, as_completed
>>> with Client("http://127.0.0.1:8000") as client:
...     futures = [client.submit("tiny", {"INPUT0": x}) for x in batches]
...     for future in as_completed(futures):
...         print(future.result()["OUTPUT0"])

``Client(url)`` picks the transport from the URL: ``http://`` (binary tensors over the
V2 REST API) or ``grpc://``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from conveyor.client._base import BaseClient
from conveyor.futures import InferFuture, as_completed, as_completed_async

__all__ = ["BaseClient", "Client", "InferFuture", "as_completed", "as_completed_async"]


# A factory with a class-like name: callers write Client(url) whatever the transport.
def Client(url: str, **options: Any) -> BaseClient:
    """A client for the server at ``url`` (``http://host:port`` or ``grpc://host:port``)."""
    scheme = urlsplit(url).scheme
    if scheme in ("http", "https"):
        from conveyor.client.http import HTTPClient

        return HTTPClient(url, **options)
    if scheme == "grpc":
        from conveyor.client.grpc import GRPCClient

        client: BaseClient = GRPCClient(url, **options)
        return client
    raise ValueError(f"unsupported URL scheme {scheme!r} in {url!r}; use http:// or grpc://")
