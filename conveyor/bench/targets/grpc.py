"""V2 over gRPC (``inference.GRPCInferenceService``): raw tensor contents, a prebuilt message.

The ModelInferRequest is built once with the generated messages and ``wire.join_raw``
(the tensors joined straight from their numpy buffers) and sent as bytes with no
serializer; answers come back as bytes and are not parsed, so the generator pays for the
call and nothing else. The control side is a blocking channel with the generated
messages: the generator's channels live on its own event loop, and a second asyncio gRPC
loop in the same process (an async client's) would share grpc's completion queue with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
import numpy as np
from google.protobuf import json_format

from conveyor.bench.inputs import ModelSpec
from conveyor.bench.server_stats import StatsTotals
from conveyor.bench.targets.base import Client, Control, RequestFailed, TargetSpec
from conveyor.protocol.grpc import converters, wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc.methods import METHODS

INFER_PATH = METHODS["ModelInfer"].path
# No limit on message size: the 4 MiB tensor is the point of one of the scenarios.
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
]


class GrpcControl(Control):
    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec
        host, port = spec.address
        self._channel = grpc.insecure_channel(f"{host}:{port}", options=CHANNEL_OPTIONS)

    def _call(self, name: str, message_class: type) -> Any:
        method = METHODS[name]
        call = self._channel.unary_unary(
            method.path,
            request_serializer=method.request.SerializeToString,
            response_deserializer=method.response.FromString,
        )
        request = message_class(name=self.spec.model, version=self.spec.version)
        return call(request, timeout=self.spec.timeout_s)

    def describe(self) -> ModelSpec:
        try:
            metadata = self._call("ModelMetadata", pb.ModelMetadataRequest)
        except grpc.RpcError as exc:
            raise RequestFailed(
                f"{self.spec.url}: model {self.spec.model!r}: ModelMetadata: "
                f"{exc.code().name}: {exc.details()}"
            ) from None
        try:
            config = self._call("ModelConfig", pb.ModelConfigRequest).config
            max_batch: int | None = config.max_batch_size
        except grpc.RpcError:
            max_batch = None  # a V2 server without Triton's ModelConfig (MLServer)
        return ModelSpec.from_metadata(_as_json(metadata), max_batch)

    def statistics(self) -> StatsTotals | None:
        try:
            response = self._call("ModelStatistics", pb.ModelStatisticsRequest)
        except grpc.RpcError:  # no statistics extension: report none
            return None
        return StatsTotals.from_json(_as_json(response), self.spec.model, self.spec.version)

    def close(self) -> None:
        self._channel.close()


def _as_json(message: Any) -> dict:
    """A response as the HTTP JSON it mirrors (64-bit counts come as strings; readers int())."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


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
