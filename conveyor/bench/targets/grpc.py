"""V2 over gRPC (``inference.GRPCInferenceService``): raw tensor contents, a prebuilt message.

The ModelInferRequest is built once with the generated messages and ``wire.join_raw``
(the tensors joined straight from their numpy buffers) and sent as bytes with no
serializer; answers come back as bytes and are not parsed, so the generator pays for the
call and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
import numpy as np

from conveyor.bench.targets.base import Client, RequestFailed, TargetSpec
from conveyor.protocol.grpc import converters, wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc.methods import METHODS

INFER_PATH = METHODS["ModelInfer"].path
# No limit on message size: the 4 MiB tensor is the point of one of the scenarios.
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
]


def build_request(spec: TargetSpec, inputs: Mapping[str, np.ndarray]) -> bytes:
    """A serialized ModelInferRequest carrying ``inputs`` in raw_input_contents."""
    request = pb.ModelInferRequest(model_name=spec.model, model_version=spec.version)
    buffers = converters.add_inputs(request, inputs)
    return wire.join_raw(request, wire.RAW_INPUT_FIELD, buffers)


class GrpcClient(Client):
    def __init__(self, spec: TargetSpec, inputs: Mapping[str, np.ndarray]) -> None:
        self._request = build_request(spec, inputs)
        host, port = spec.address
        self._target = f"{host}:{port}"
        self._call: Any = None  # opened on the loop that first sends

    async def infer(self) -> None:
        if self._call is None:  # the channel belongs to the loop that first uses it
            self._channel = grpc.aio.insecure_channel(self._target, options=CHANNEL_OPTIONS)
            self._call = self._channel.unary_unary(INFER_PATH)
        try:
            await self._call(self._request)
        except grpc.aio.AioRpcError as exc:
            raise RequestFailed(f"{exc.code().name}: {exc.details()}") from None

    async def close(self) -> None:
        if self._call is not None:
            await self._channel.close()
