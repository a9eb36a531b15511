"""V2 over gRPC (``inference.GRPCInferenceService``): raw tensor contents, prebuilt messages.

Requests are serialized once (``pbwire``) and sent as bytes with no serializer; answers
come back as bytes and only the presence of ``raw_output_contents`` is checked, so the
generator pays for the call and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc
import numpy as np

from conveyor.bench.inputs import ModelSpec
from conveyor.bench.server_stats import StatsTotals
from conveyor.bench.targets import pbwire
from conveyor.bench.targets.base import Client, Control, RequestFailed, TargetSpec
from conveyor.bench.targets.http_wire import raw_contents

SERVICE = "/inference.GRPCInferenceService/"
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

    def _call(self, method: str, request: bytes) -> bytes:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes]
        call = self._channel.unary_unary(SERVICE + method)
        return call(request, timeout=self.spec.timeout_s)

    def describe(self) -> ModelSpec:
        request = pbwire.string_request(self.spec.model, self.spec.version)
        try:
            metadata = pbwire.metadata_response(self._call("ModelMetadata", request))
        except grpc.RpcError as exc:
            raise RequestFailed(f"ModelMetadata: {exc.code().name}: {exc.details()}") from None
        try:
            max_batch: int | None = pbwire.config_max_batch_size(
                self._call("ModelConfig", request)
            )
        except grpc.RpcError:
            max_batch = None  # a V2 server without Triton's ModelConfig (MLServer)
        return ModelSpec.from_metadata(metadata, max_batch)

    def statistics(self) -> StatsTotals | None:
        request = pbwire.string_request(self.spec.model, self.spec.version)
        try:
            body = pbwire.statistics_response(self._call("ModelStatistics", request))
        except (grpc.RpcError, ValueError, IndexError):  # no usable statistics: report none
            return None
        return StatsTotals.from_json(body, self.spec.model, self.spec.version)

    def close(self) -> None:
        self._channel.close()


def build_request(spec: TargetSpec, inputs: Mapping[str, np.ndarray],
                  declared: Mapping[str, str]) -> bytes:
    tensors = {}
    for name, array in inputs.items():
        datatype = declared.get(name) or ("BYTES" if array.dtype == object else "")
        if not datatype:
            from conveyor.protocol.datatypes import datatype_of

            datatype = datatype_of(array.dtype)
        tensors[name] = (datatype, array.shape, raw_contents(array, datatype))
    return pbwire.infer_request(spec.model, spec.version, tensors)


class GrpcClient(Client):
    def __init__(self, spec: TargetSpec, inputs: Mapping[str, np.ndarray],
                 declared: Mapping[str, str]) -> None:
        self._request = build_request(spec, inputs, declared)
        host, port = spec.address
        self._target = f"{host}:{port}"
        self._call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] | None = None

    async def infer(self) -> None:
        if self._call is None:  # the channel belongs to the loop that first uses it
            self._channel = grpc.aio.insecure_channel(self._target, options=CHANNEL_OPTIONS)
            self._call = self._channel.unary_unary(SERVICE + "ModelInfer")
        try:
            await self._call(self._request)
        except grpc.aio.AioRpcError as exc:
            raise RequestFailed(f"{exc.code().name}: {exc.details()}") from None

    async def close(self) -> None:
        if self._call is not None:
            await self._channel.close()
