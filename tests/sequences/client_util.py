"""Driving the accumulator models with tritonclient's sequence arguments, on either protocol."""

from __future__ import annotations

from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer

PROTOCOLS = ("http", "grpc")
TRITON_MODELS = ("accumulate_triton", "accumulate_native")


def client(server: RunningServer, protocol: str) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    return grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))


def batched(model: str) -> bool:
    return model.startswith("accumulate_triton")  # max_batch_size 4: [1, 1] tensors


def add(
    conn: Any,
    protocol: str,
    model: str,
    value: int,
    sequence_id: int | str,
    *,
    start: bool = False,
    end: bool = False,
) -> int:
    """Send one value of a sequence; return the running sum the model answers."""
    module = httpclient if protocol == "http" else grpcclient
    data = np.array([[value]] if batched(model) else [value], dtype=np.int32)
    tensor = module.InferInput("INPUT", list(data.shape), "INT32")
    tensor.set_data_from_numpy(data)
    result = conn.infer(
        model,
        [tensor],
        sequence_id=sequence_id,
        sequence_start=start,
        sequence_end=end,
    )
    return int(result.as_numpy("OUTPUT").ravel()[0])


def refused(call: Any) -> tuple[str, str]:
    """Run ``call``; return the status and message it was refused with."""
    try:
        call()
    except InferenceServerException as exc:
        return str(exc.status()), str(exc.message())
    raise AssertionError("the request was not refused")


BAD_REQUEST = {"http": "400", "grpc": "StatusCode.INVALID_ARGUMENT"}
UNAVAILABLE = {"http": "503", "grpc": "StatusCode.UNAVAILABLE"}
