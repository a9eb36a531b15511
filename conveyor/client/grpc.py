"""The V2 gRPC client: the engine's shape (``submit`` -> InferFuture, ``await infer``) over gRPC.

>>> client = Client("grpc://127.0.0.1:8001")          # conveyor.client.Client
>>> client.submit("tiny", {"INPUT0": np.ones((1, 16), np.float32)}).result()["OUTPUT0"]
>>> requests = (InferRequest("tiny", {"INPUT0": x}, request_id=str(i)) for i, x in enumerate(xs))
>>> for done in client.stream(requests):              # one stream, answers as they complete
...     print(done.request_id, done.result())

Tensors travel as raw bytes (``raw_input_contents``) unless ``raw_contents=False``. Works
with any server of ``inference.GRPCInferenceService`` (Conveyor or Triton).

It uses the .proto's generated messages, method table and converters from
``conveyor.protocol.grpc``, which the server's gRPC front end uses too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import queue
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message

from conveyor.client._base import DEFAULT_CALL_TIMEOUT_S, BaseClient
from conveyor.client.shared_memory import DEFAULT_THRESHOLD, OutputSlot
from conveyor.errors import ConveyorError, ErrorKind, InvalidInput, Unavailable, error_for_kind
from conveyor.futures import InferFuture, Outputs
from conveyor.protocol.grpc import converters, decoupled, wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc.methods import METHODS
from conveyor.protocol.limits import DEFAULT_MAX_MESSAGE_BYTES
from conveyor.protocol.parameters import wire_timeout
from conveyor.protocol.request import InferenceRequest, wire_parameters
from conveyor.protocol.shared_memory import InputInRegion

# The server's status -> the error raised here (the reverse of the server's edge mapping;
# an ErrorKind is named after the gRPC status it stands for, but for MODEL_UNSUPPORTED,
# which shares UNIMPLEMENTED with UNIMPLEMENTED and differs only over HTTP).
_ERRORS: dict[grpc.StatusCode, type[ConveyorError]] = {
    grpc.StatusCode[kind.name]: error_for_kind(kind)
    for kind in ErrorKind
    if kind.name in grpc.StatusCode.__members__
}
# A message over a size limit, the client's or the server's.
_ERRORS[grpc.StatusCode.RESOURCE_EXHAUSTED] = InvalidInput


def error_from_rpc(error: grpc.aio.AioRpcError) -> ConveyorError:
    """The ConveyorError a failed call's status stands for, with the server's message."""
    code = error.code()
    return _ERRORS.get(code, ConveyorError)(f"{error.details() or code.name} (gRPC {code.name})")


@dataclasses.dataclass(frozen=True)
class InferRequest:
    """One request of :meth:`GRPCClient.stream`; the fields are ``submit``'s arguments."""

    model: str
    inputs: Mapping[str, Any]
    version: int | str | None = None
    outputs: Sequence[str] | None = None
    priority: int = 0
    timeout: float | None = None
    request_id: str | None = None


class GRPCClient(BaseClient):
    """``GRPCClient("grpc://127.0.0.1:8001")``; see :class:`BaseClient` for the shared API."""

    def __init__(
        self,
        url: str,
        *,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT_S,
        raw_contents: bool = True,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        shared_memory: bool = True,
        shared_memory_threshold: int = DEFAULT_THRESHOLD,
    ) -> None:
        """``raw_contents``: tensors as raw bytes (False: typed ``contents`` fields, slower).

        ``max_message_bytes``: the largest message sent or received (gRPC's default is 4 MiB).
        ``shared_memory``: see :class:`BaseClient`.
        """
        super().__init__(
            url,
            call_timeout=call_timeout,
            shared_memory=shared_memory,
            shared_memory_threshold=shared_memory_threshold,
        )
        self.target = self.url.removeprefix("grpc://")
        self.raw_contents = raw_contents
        self._max_message_bytes = max_message_bytes
        self._channel: grpc.aio.Channel | None = None
        self._calls: dict[str, Any] = {}
        self._stream_ids = itertools.count()

    async def _open(self) -> None:
        self._channel = grpc.aio.insecure_channel(
            self.target,
            options=[
                ("grpc.max_send_message_length", self._max_message_bytes),
                ("grpc.max_receive_message_length", self._max_message_bytes),
            ],
        )
        for name, method in METHODS.items():
            kind = (
                self._channel.stream_stream
                if method.client_streaming
                else self._channel.unary_unary
            )
            serialize, deserialize = method.request.SerializeToString, method.response.FromString
            if name in ("ModelInfer", "ModelStreamInfer"):
                serialize = _serialized  # requests are joined with their raw tensors already
            if name == "ModelInfer":
                deserialize = _read_infer_response  # tensors stay views of the received bytes
            self._calls[name] = kind(
                method.path, request_serializer=serialize, response_deserializer=deserialize
            )

    async def _close(self) -> None:
        if self._channel is not None:
            await self._channel.close()

    # -- inference ------------------------------------------------------------------------

    async def _infer(
        self,
        request: InferenceRequest,
        *,
        in_regions: Mapping[str, InputInRegion] | None = None,
        out_regions: Mapping[str, OutputSlot] | None = None,
    ) -> Outputs:
        message = self._request(request, in_regions, out_regions=out_regions)
        # The request's own timeout is also the call's deadline: a server that ignores the
        # parameter still stops waiting (and drops the queued request) when it passes.
        deadline = self._deadline(request.timeout)
        response, raw = await self._unary("ModelInfer", message, deadline)
        slots = out_regions or {}
        results = converters.decode_outputs(response, raw, slots)
        for tensor in response.outputs:
            slot = slots.get(tensor.name)
            if slot is not None:
                results[tensor.name] = slot.read(tensor.datatype, tuple(tensor.shape))
        return results

    async def _responses(self, request: InferenceRequest) -> AsyncIterator[Outputs]:
        """One request on its own ModelStreamInfer call, asking for Triton's final flag."""
        message = self._request(request, final_flag=True)
        call = self._calls["ModelStreamInfer"](timeout=self._deadline(request.timeout))
        try:
            await call.write(message)
            await call.done_writing()
            while (response := await call.read()) is not grpc.aio.EOF:
                if response.error_message:
                    raise _stream_error(response)
                answer = response.infer_response
                if answer.outputs:
                    yield converters.decode_outputs(answer)
                final = answer.parameters.get(decoupled.FINAL)
                if final is not None and final.bool_param:
                    return
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc) from None
        finally:
            call.cancel()

    def stream(
        self, requests: Iterable[InferRequest], *, timeout: float | None = None
    ) -> Iterator[InferFuture]:
        """Send ``requests`` on one ModelStreamInfer stream; yield each future as it completes.

        ``requests`` is read as the stream goes (it may be a lazy generator) while answers
        come back in completion order, not send order. Each yielded future is done: its
        ``result()`` or its request's error; ``request_id`` says which request it was (ids
        are made up for requests without one). ``timeout`` (seconds) bounds the whole
        stream; stopping the iteration early cancels the stream.
        """
        self._ensure_open()
        completed: queue.SimpleQueue[InferFuture | None] = queue.SimpleQueue()
        running = asyncio.run_coroutine_threadsafe(
            self._stream(iter(requests), completed, timeout), self._loop
        )
        try:
            while (future := completed.get()) is not None:
                yield future
            running.result()  # the stream's own failure, if any
        finally:
            if not running.done():
                running.cancel()

    async def _stream(
        self,
        requests: Iterator[InferRequest],
        completed: queue.SimpleQueue[InferFuture | None],
        timeout: float | None,
    ) -> None:
        call = self._calls["ModelStreamInfer"](timeout=timeout)
        sent: dict[str, InferFuture] = {}
        prefix = f"stream-{next(self._stream_ids)}-"
        end = object()

        async def send() -> None:
            loop = asyncio.get_running_loop()
            for index in itertools.count():
                # The caller's iterable may block (a generator that waits for work): read it
                # on a worker thread, never on the loop that carries the answers.
                item = await loop.run_in_executor(None, next, requests, end)
                if item is end:
                    break
                assert isinstance(item, InferRequest)
                request_id = item.request_id if item.request_id is not None else f"{prefix}{index}"
                if request_id in sent:
                    raise InvalidInput(
                        f"request id {request_id!r} is used twice in one stream; its answers "
                        "could not be told apart"
                    )
                message = self._request(
                    InferenceRequest(
                        item.model,
                        item.inputs,
                        item.version,
                        item.outputs,
                        request_id,
                        item.priority,
                        item.timeout,
                    )
                )
                future = InferFuture()
                future.request_id = request_id
                sent[request_id] = future
                await call.write(message)
            await call.done_writing()

        def stop_if_failed(task: asyncio.Task[None]) -> None:
            if _failure(task) is not None:
                call.cancel()  # bad requests end the stream (the error is raised below)

        sender = asyncio.create_task(send())
        sender.add_done_callback(stop_if_failed)
        try:
            while (response := await call.read()) is not grpc.aio.EOF:
                request_id = response.infer_response.id
                future = sent.pop(request_id, None)
                if future is None:
                    raise ConveyorError(
                        f"the server answered request id {request_id!r}, which this stream "
                        "did not send (or had answered already)"
                    )
                future.set_running_or_notify_cancel()
                if response.error_message:
                    future.set_exception(_stream_error(response))
                else:
                    try:
                        future.set_result(converters.decode_outputs(response.infer_response))
                    except ConveyorError as exc:
                        future.set_exception(exc)
                completed.put(future)
            await sender  # re-raises what stopped the requests, if anything
            if sent:
                raise Unavailable(
                    f"the stream ended with {len(sent)} requests unanswered "
                    f"(e.g. id {next(iter(sent))!r})"
                )
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as exc:
            failure = _failure(sender)
            if failure is not None:
                raise failure from None
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise error_from_rpc(exc) from None
        finally:
            sender.cancel()
            call.cancel()
            completed.put(None)

    def _request(
        self,
        infer: InferenceRequest,
        in_regions: Mapping[str, InputInRegion] | None = None,
        *,
        out_regions: Mapping[str, OutputSlot] | None = None,
        final_flag: bool = False,
    ) -> bytes:
        """The serialized ModelInferRequest (each raw tensor copied once, by the join).

        ``final_flag``: ask for Triton's ``triton_final_response`` (streamed requests)."""
        version = "" if infer.version is None else str(infer.version)
        request = pb.ModelInferRequest(
            model_name=infer.model, model_version=version, id=infer.id or ""
        )
        buffers = converters.add_inputs(request, infer.inputs, raw=self.raw_contents)
        for name, placed in (in_regions or {}).items():
            tensor = request.inputs.add(name=name, datatype=placed.datatype, shape=placed.shape)
            for key, value in placed.location.parameters().items():
                converters.set_parameter(tensor.parameters, key, value)
        for name in infer.outputs or ():
            output = request.outputs.add(name=name)
            slot = (out_regions or {}).get(name)
            if slot is not None:
                for key, value in slot.location.parameters().items():
                    converters.set_parameter(output.parameters, key, value)
        for key, value in wire_parameters(infer).items():
            converters.set_parameter(request.parameters, key, value)
        if final_flag:
            converters.set_parameter(request.parameters, decoupled.ENABLE_EMPTY_FINAL, True)
        return wire.join_raw(request, wire.RAW_INPUT_FIELD, buffers)

    def _deadline(self, timeout: float | None) -> float | None:
        micros = wire_timeout(timeout)  # as the server reads it: microseconds, rounded up
        if micros is None:
            return self.call_timeout
        seconds = micros / 1_000_000
        return seconds if self.call_timeout is None else min(seconds, self.call_timeout)

    async def _unary(self, name: str, request: Any, timeout: float | None = None) -> Any:
        try:
            return await self._calls[name](request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc) from None

    async def _register_region(self, name: str, key: str, byte_size: int) -> None:
        request = pb.SystemSharedMemoryRegisterRequest(
            name=name, key=key, offset=0, byte_size=byte_size
        )
        await self._unary("SystemSharedMemoryRegister", request, self.call_timeout)

    async def _unregister_region(self, name: str) -> None:
        request = pb.SystemSharedMemoryUnregisterRequest(name=name)
        await self._unary("SystemSharedMemoryUnregister", request, self.call_timeout)

    # -- information and the model repository --------------------------------------------

    async def _get(
        self, what: str, model: str | None = None, version: int | str | None = None
    ) -> Any:
        v = "" if version is None else str(version)
        timeout = self.call_timeout
        if what == "live":
            return (await self._unary("ServerLive", pb.ServerLiveRequest(), timeout)).live
        if what == "ready":
            return (await self._unary("ServerReady", pb.ServerReadyRequest(), timeout)).ready
        if what == "model_ready":
            request: Message = pb.ModelReadyRequest(name=model or "", version=v)
            return (await self._unary("ModelReady", request, timeout)).ready
        if what == "server_metadata":
            return _as_dict(
                await self._unary("ServerMetadata", pb.ServerMetadataRequest(), timeout)
            )
        if what == "model_metadata":
            request = pb.ModelMetadataRequest(name=model or "", version=v)
            return _as_dict(await self._unary("ModelMetadata", request, timeout))
        if what == "model_config":
            request = pb.ModelConfigRequest(name=model or "", version=v)
            return _as_dict((await self._unary("ModelConfig", request, timeout)).config)
        if what == "statistics":
            request = pb.ModelStatisticsRequest(name=model or "", version=v)
            return _as_dict(await self._unary("ModelStatistics", request, timeout))
        raise ValueError(f"unknown information {what!r}")

    def repository_index(self, *, ready: bool = False) -> list[dict[str, Any]]:
        """Every model of the server's repository: name, version, state, reason."""
        request = pb.RepositoryIndexRequest(ready=ready)
        response = self._call(self._unary("RepositoryIndex", request, self.call_timeout))
        return [_as_dict(model) for model in response.models]

    def load_model(self, model: str) -> None:
        """Load (or reload) ``model``; the server must run with --model-control explicit."""
        request = pb.RepositoryModelLoadRequest(model_name=model)
        self._call(self._unary("RepositoryModelLoad", request, self.call_timeout))

    def unload_model(self, model: str) -> None:
        request = pb.RepositoryModelUnloadRequest(model_name=model)
        self._call(self._unary("RepositoryModelUnload", request, self.call_timeout))


def _serialized(request: bytes | Any) -> bytes:
    return request if isinstance(request, bytes) else request.SerializeToString()


def _read_infer_response(data: bytes) -> tuple[pb.ModelInferResponse, Any]:
    return wire.split_raw(data, pb.ModelInferResponse, wire.RAW_OUTPUT_FIELD)


def _as_dict(message: Any) -> dict[str, Any]:
    """A message as plain values: the .proto's field names (as the HTTP JSON), every field.

    (protobuf's own JSON mapping would turn 64-bit integers into strings.)
    """
    result: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            nested = entry.fields_by_name["value"].message_type is not None
            result[field.name] = {k: _as_dict(v) if nested else v for k, v in value.items()}
        elif field.is_repeated:
            result[field.name] = [_as_dict(v) if entry else _plain(field, v) for v in value]
        elif entry is not None:
            result[field.name] = _as_dict(value)
        else:
            result[field.name] = _plain(field, value)
    return result


def _plain(field: Any, value: Any) -> Any:
    return field.enum_type.values_by_number[value].name if field.enum_type else value


def _failure(task: asyncio.Task[None]) -> BaseException | None:
    if not task.done() or task.cancelled():
        return None
    return task.exception()


def _stream_error(response: pb.ModelStreamInferResponse) -> ConveyorError:
    # A stream error has no status of its own; Conveyor's server names one in a parameter.
    code = response.infer_response.parameters.get("error_code")
    status = getattr(grpc.StatusCode, code.string_param, None) if code is not None else None
    return _ERRORS.get(status, ConveyorError)(response.error_message)  # type: ignore[arg-type]  # a None status finds no entry
