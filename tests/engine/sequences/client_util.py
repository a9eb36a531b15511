"""Driving the accumulator models with tritonclient's sequence arguments, on either protocol."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conveyor.testing import RunningServer

PROTOCOLS = ("http", "grpc")
TRITON_MODELS = ("accumulate_triton", "accumulate_native")


# Every client made, with the thread that made it, for close_clients.
_made: list[tuple[int, Any]] = []


def client(server: RunningServer, protocol: str) -> Any:
    if protocol == "http":
        made = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    else:
        made = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    _made.append((threading.get_ident(), made))
    return made


def close_clients() -> None:
    """Close the clients this thread made; forget the rest (their tests close them).

    A gevent HTTP client must be closed on the thread that made it, and one left to the
    garbage collector warns of its unclosed socket in whichever later test collects it,
    where pytest turns the warning into that test's failure.
    """
    me = threading.get_ident()
    for maker, made in _made:
        if maker == me:
            made.close()
    _made.clear()


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
