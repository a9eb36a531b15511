"""The tritonclient module of a protocol."""

from __future__ import annotations

from typing import Any

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient


def module_of(protocol: str) -> Any:
    return httpclient if protocol == "http" else grpcclient
