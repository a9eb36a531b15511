"""What differs between tritonclient's HTTP and gRPC clients, for tests run over both."""

from __future__ import annotations

from typing import Any

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient


def client_module(protocol: str) -> Any:
    return httpclient if protocol == "http" else grpcclient


def bad_request_status(protocol: str) -> str:
    """What tritonclient's exception ``status()`` says for a 400 / INVALID_ARGUMENT."""
    return "400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT"
