"""V2 over one gRPC bidirectional stream (ModelStreamInfer): many requests, one call.

A unary gRPC call costs the Python client about as much as the server's whole work on a
small model (see ``conveyor bench ceiling``); on a stream each request is one message,
which roughly doubles what one generator core can send. Answers come back in completion
order, so every request carries an ``id`` and one reader task hands each answer to its
waiter. The id is a one-field ModelInferRequest serialized on its own and appended to the
prebuilt message (protobuf merges concatenated messages), so the tensors are never
serialized again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import grpc
import numpy as np

from conveyor.bench.targets.base import RequestFailed, TargetSpec
from conveyor.bench.targets.grpc import CHANNEL_OPTIONS, GrpcClient
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc.methods import METHODS

STREAM_PATH = METHODS["ModelStreamInfer"].path


def answer_of(message: bytes) -> tuple[str, str]:
    """(request id, error message) of a serialized ModelStreamInferResponse."""
    answer = pb.ModelStreamInferResponse.FromString(message)
    return answer.infer_response.id, answer.error_message


def with_id(request: bytes, request_id: str) -> bytes:
    """The prebuilt ``request`` with its ``id`` set."""
    return request + pb.ModelInferRequest(id=request_id).SerializeToString()


class GrpcStreamClient(GrpcClient):
    """:class:`GrpcClient`'s request, sent on one ModelStreamInfer stream; answers are
    matched to their requests by id."""

    def __init__(self, spec: TargetSpec, inputs: Mapping[str, np.ndarray]) -> None:
        super().__init__(spec, inputs)
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._next = 0
        self._write_lock: asyncio.Lock | None = None

    async def _open(self) -> None:
        self._channel = grpc.aio.insecure_channel(self._target, options=CHANNEL_OPTIONS)
        self._call = self._channel.stream_stream(STREAM_PATH)()
        self._write_lock = asyncio.Lock()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._call is not None
        try:
            while True:
                message = await self._call.read()
                if message is grpc.aio.EOF:
                    raise RequestFailed("the server ended the stream")
                request_id, error = answer_of(message)
                waiter = self._waiting.pop(request_id, None)
                if waiter is None or waiter.done():
                    continue
                if error:
                    waiter.set_exception(RequestFailed(error))
                else:
                    waiter.set_result(None)
        except BaseException as exc:  # the stream is gone: fail everything still waiting
            failure = (
                exc
                if isinstance(exc, RequestFailed)
                else RequestFailed(
                    f"stream failed: {exc!r}"
                    if not isinstance(exc, grpc.aio.AioRpcError)
                    else f"{exc.code().name}: {exc.details()}"
                )
            )
            for waiter in self._waiting.values():
                if not waiter.done():
                    waiter.set_exception(failure)
            self._waiting.clear()
            self._call = None
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def infer(self) -> None:
        if self._call is None:
            await self._open()
        assert self._call is not None and self._write_lock is not None
        self._next += 1
        request_id = str(self._next)
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        try:
            async with self._write_lock:  # one write at a time on a stream
                await self._call.write(with_id(self._request, request_id))
            await waiter
        finally:
            self._waiting.pop(request_id, None)

    async def close(self) -> None:
        if self._call is not None:
            self._reader.cancel()
            self._call.cancel()
            await self._channel.close()
