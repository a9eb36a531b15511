"""A V2 gRPC client with the engine's shape: ``submit`` -> InferFuture, ``await infer``.

>>> client = GRPCClient("grpc://127.0.0.1:8001")
>>> future = client.submit("tiny", {"INPUT0": np.ones((1, 16), np.float32)})
>>> future.result(timeout=5)["OUTPUT0"]
>>> for done in client.stream(InferRequest("tiny", {...}, request_id=str(i)) for i in range(100)):
...     print(done.request_id, done.result())          # in the order they complete

Tensors travel as raw bytes (``raw_input_contents``) unless ``raw_contents=False``. Works
with any server of ``inference.GRPCInferenceService`` (Conveyor, Triton).

It uses the .proto's generated messages and method table from ``conveyor.server.grpc``;
those modules import nothing of the server itself.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import grpc

from conveyor.errors import (
    Cancelled,
    ConveyorError,
    DeadlineExceeded,
    InvalidInput,
    ModelError,
    ModelNotFound,
    Unauthenticated,
    Unavailable,
    Unsupported,
)
from conveyor.futures import InferFuture, Outputs
from conveyor.protocol.parameters import wire_priority, wire_timeout
from conveyor.server.grpc import converters
from conveyor.server.grpc._generated import grpc_service_pb2 as pb
from conveyor.server.grpc.service import METHODS

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

# What a gRPC status means as a Conveyor error (the inverse of the server's status_code).
_ERRORS: dict[grpc.StatusCode, type[ConveyorError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidInput,
    grpc.StatusCode.NOT_FOUND: ModelNotFound,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.INTERNAL: ModelError,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.UNIMPLEMENTED: Unsupported,
    # The message exceeds a size limit, ours or the server's.
    grpc.StatusCode.RESOURCE_EXHAUSTED: InvalidInput,
}


def error_from_rpc(error: grpc.RpcError) -> ConveyorError:
    """The ConveyorError that a failed call's status stands for, with the server's message."""
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (error.details() if isinstance(error, grpc.Call) else None) or str(error)
    return _ERRORS.get(code, ConveyorError)(f"{details} (gRPC {code.name})")


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


class GRPCClient:
    """A client of one server; thread-safe; close it (or use ``with``) when done."""

    def __init__(
        self,
        url: str = "127.0.0.1:8001",
        *,
        raw_contents: bool = True,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.target = url.removeprefix("grpc://")
        self.raw_contents = raw_contents
        self._channel = grpc.insecure_channel(
            self.target,
            options=[
                ("grpc.max_send_message_length", max_message_bytes),
                ("grpc.max_receive_message_length", max_message_bytes),
            ],
        )
        self._calls = {
            name: (
                self._channel.stream_stream
                if method.client_streaming
                else self._channel.unary_unary
            )(
                method.path,
                request_serializer=method.request.SerializeToString,
                response_deserializer=method.response.FromString,
            )
            for name, method in METHODS.items()
        }
        self._stream_ids = itertools.count()

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> GRPCClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- inference ------------------------------------------------------------------------

    def submit(
        self,
        model: str,
        inputs: Mapping[str, Any],
        *,
        version: int | str | None = None,
        outputs: Sequence[str] | None = None,
        priority: int = 0,
        timeout: float | None = None,
        request_id: str | None = None,
    ) -> InferFuture:
        """Send one request; return its future at once (no thread waits for the answer).

        ``timeout`` (seconds) is both the request's V2 ``timeout`` parameter and the
        call's gRPC deadline, so a request still queued when it passes never runs.
        ``future.cancel()`` cancels the call; the server drops the request if it is still
        queued.
        """
        request = self._request(
            InferRequest(model, inputs, version, outputs, priority, timeout, request_id)
        )
        future = InferFuture()
        future.request_id = request_id
        call = self._calls["ModelInfer"].future(request, timeout=timeout)

        def on_call_done(call: Any) -> None:  # on a gRPC thread
            if not future.set_running_or_notify_cancel():
                return  # cancelled by the caller meanwhile
            try:
                response = call.result()
            except grpc.RpcError as exc:
                future.set_exception(error_from_rpc(exc))
                return
            try:
                future.set_result(converters.decode_outputs(response))
            except Exception as exc:
                future.set_exception(exc)

        def on_future_done(done: InferFuture) -> None:
            if done.cancelled():
                call.cancel()

        future.add_done_callback(on_future_done)
        call.add_done_callback(on_call_done)
        return future

    async def infer(self, model: str, inputs: Mapping[str, Any], **kwargs: Any) -> Outputs:
        """``submit`` and await the result; the awaiting coroutine suspends, no thread waits."""
        return await self.submit(model, inputs, **kwargs)

    def stream(
        self, requests: Iterable[InferRequest], *, timeout: float | None = None
    ) -> Iterator[InferFuture]:
        """Send ``requests`` on one ModelStreamInfer stream; yield each future as it completes.

        Requests are sent as ``requests`` produces them (it may be a lazy generator) while
        responses come back, in completion order, not send order. Each yielded future is
        done: ``result()`` or the request's error; ``request_id`` says which request it
        was (ids are made up for requests without one). ``timeout`` bounds the whole stream.
        """
        pending: dict[str, InferFuture] = {}
        lock = threading.Lock()
        problem: list[BaseException] = []
        stream_number = next(self._stream_ids)

        def messages() -> Iterator[pb.ModelInferRequest]:  # consumed on a gRPC thread
            try:
                for index, item in enumerate(requests):
                    request_id = item.request_id
                    if request_id is None:
                        request_id = f"stream-{stream_number}-{index}"
                    message = self._request(dataclasses.replace(item, request_id=request_id))
                    future = InferFuture()
                    future.request_id = request_id
                    with lock:
                        if request_id in pending:
                            raise InvalidInput(
                                f"request id {request_id!r} is used twice in one stream; "
                                "responses could not be told apart"
                            )
                        pending[request_id] = future
                    yield message
            except Exception as exc:  # reported to the caller once the stream ends
                problem.append(exc)

        responses = self._calls["ModelStreamInfer"](messages(), timeout=timeout)
        try:
            for response in responses:
                request_id = response.infer_response.id
                with lock:
                    future = pending.pop(request_id, None)
                if future is None:
                    raise ConveyorError(
                        f"the server answered request id {request_id!r}, which this stream "
                        "did not send (or already got)"
                    )
                future.set_running_or_notify_cancel()
                if response.error_message:
                    future.set_exception(_stream_error(response))
                else:
                    try:
                        future.set_result(converters.decode_outputs(response.infer_response))
                    except Exception as exc:
                        future.set_exception(exc)
                yield future
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from None
        finally:
            responses.cancel()  # no-op when the stream already ended
        if problem:
            raise problem[0]
        if pending:
            raise Unavailable(
                f"the stream ended with {len(pending)} requests unanswered "
                f"(e.g. id {next(iter(pending))!r})"
            )

    def _request(self, item: InferRequest) -> pb.ModelInferRequest:
        request = pb.ModelInferRequest(
            model_name=item.model,
            model_version="" if item.version is None else str(item.version),
            id=item.request_id or "",
        )
        converters.add_inputs(request, item.inputs, raw=self.raw_contents)
        if item.outputs is not None:
            for name in item.outputs:
                request.outputs.add(name=name)
        level = wire_priority(item.priority)
        if level:
            converters.set_parameter(request.parameters, "priority", level)
        microseconds = wire_timeout(item.timeout)
        if microseconds is not None:
            converters.set_parameter(request.parameters, "timeout", microseconds)
        return request

    # -- health, metadata, repository ------------------------------------------------------

    def _unary(self, name: str, request: Any, timeout: float | None) -> Any:
        try:
            return self._calls[name](request, timeout=timeout)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from None

    def is_live(self, *, timeout: float | None = 10.0) -> bool:
        return bool(self._unary("ServerLive", pb.ServerLiveRequest(), timeout).live)

    def is_ready(self, *, timeout: float | None = 10.0) -> bool:
        return bool(self._unary("ServerReady", pb.ServerReadyRequest(), timeout).ready)

    def is_model_ready(
        self, model: str, version: int | str | None = None, *, timeout: float | None = 10.0
    ) -> bool:
        request = pb.ModelReadyRequest(name=model, version=_version(version))
        return bool(self._unary("ModelReady", request, timeout).ready)

    def server_metadata(self, *, timeout: float | None = 10.0) -> dict[str, Any]:
        return _as_dict(self._unary("ServerMetadata", pb.ServerMetadataRequest(), timeout))

    def model_metadata(
        self, model: str, version: int | str | None = None, *, timeout: float | None = 10.0
    ) -> dict[str, Any]:
        request = pb.ModelMetadataRequest(name=model, version=_version(version))
        return _as_dict(self._unary("ModelMetadata", request, timeout))

    def model_config(
        self, model: str, version: int | str | None = None, *, timeout: float | None = 10.0
    ) -> dict[str, Any]:
        request = pb.ModelConfigRequest(name=model, version=_version(version))
        return _as_dict(self._unary("ModelConfig", request, timeout).config)

    def statistics(
        self,
        model: str | None = None,
        version: int | str | None = None,
        *,
        timeout: float | None = 10.0,
    ) -> dict[str, Any]:
        request = pb.ModelStatisticsRequest(name=model or "", version=_version(version))
        return _as_dict(self._unary("ModelStatistics", request, timeout))

    def repository_index(
        self, *, ready: bool = False, timeout: float | None = 10.0
    ) -> list[dict[str, Any]]:
        response = self._unary("RepositoryIndex", pb.RepositoryIndexRequest(ready=ready), timeout)
        return [_as_dict(model) for model in response.models]

    def load_model(self, model: str, *, timeout: float | None = 120.0) -> None:
        self._unary("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name=model), timeout)

    def unload_model(self, model: str, *, timeout: float | None = 120.0) -> None:
        request = pb.RepositoryModelUnloadRequest(model_name=model)
        self._unary("RepositoryModelUnload", request, timeout)


def _version(version: int | str | None) -> str:
    return "" if version is None else str(version)


def _as_dict(message: Any) -> dict[str, Any]:
    """A message as plain Python values: field names as in the .proto, every field present.

    (protobuf's JSON mapping would turn 64-bit integers into strings.)
    """
    result: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            result[field.name] = {
                key: _as_dict(item) if value_field.message_type is not None else item
                for key, item in value.items()
            }
        elif field.is_repeated:
            result[field.name] = [
                _as_dict(item) if field.message_type is not None else _plain(field, item)
                for item in value
            ]
        elif field.message_type is not None:
            result[field.name] = _as_dict(value)
        else:
            result[field.name] = _plain(field, value)
    return result


def _plain(field: Any, value: Any) -> Any:
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return value


def _stream_error(response: pb.ModelStreamInferResponse) -> ConveyorError:
    # A stream error has no status of its own; Conveyor's server names it in a parameter.
    code = response.infer_response.parameters.get("error_code")
    kind = _ERRORS.get(
        getattr(grpc.StatusCode, code.string_param, grpc.StatusCode.UNKNOWN)
        if code is not None
        else grpc.StatusCode.UNKNOWN,
        ConveyorError,
    )
    return kind(response.error_message)
