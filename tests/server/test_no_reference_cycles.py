"""What a request leaves behind is freed by reference counting alone: with the cycle
collector off, a closed HTTP connection's parser, an HTTP infer request its model failed,
a refused large gRPC message (its error, its frames, its megabytes) and a failed gRPC
infer call driven by callbacks are gone, not waiting for the next full collection.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from conveyor import Engine
from conveyor.errors import InvalidInput
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.server.dataplane import DataPlane
from conveyor.server.grpc.h2.calls import CallContext
from conveyor.server.grpc.servicer import LARGE_MESSAGE_BYTES, InferenceServicer, LargeMessage
from conveyor.server.http.listener import HTTPToolsFrontEnd
from conveyor.server.http.parser import RequestParser
from conveyor.server.http.routes import V2Routes
from tests.cycles import left_in_cycles
from tests.models import FAILING_CONFIG, FAILING_MODEL, RepoBuilder


def test_a_closed_connections_parser_is_freed() -> None:
    def one_connection() -> None:
        parser = RequestParser(max_body_bytes=1 << 20)
        events = parser.feed(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert events  # the request was read
        parser.close()

    assert "RequestParser" not in left_in_cycles(one_connection)


def test_a_large_message_refused_on_its_thread_is_freed() -> None:
    async def refused() -> bool:
        # As the ModelInfer handler: awaited on the loop, caught there.
        message = LargeMessage(bytes(LARGE_MESSAGE_BYTES + 4 * 1024 * 1024))  # field 0: bad
        try:
            await message.decoded()
        except InvalidInput:
            return True
        return False

    def one_refusal() -> None:
        assert asyncio.run(refused()), "a message of zero bytes was not refused"

    left = left_in_cycles(one_refusal)
    assert not {"InvalidInput", "LargeMessage", "memoryview"} & left, left


def test_a_failed_infer_call_started_without_a_coroutine_is_freed() -> None:
    # As Conveyor's HTTP/2 transport starts a unary ModelInfer: the failure is raised as
    # grpc.aio.AbortError with the status on the call's context, and the error it stands
    # for (its traceback's frames hold it and the request) must not stay in a cycle.
    servicer = InferenceServicer(DataPlane(version="test"))  # no engine: models loading
    request = pb.ModelInferRequest(model_name="tiny")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 2])
    codes = []

    def failed_calls() -> None:
        for received in (
            InvalidInput("could not parse the ModelInferRequest"),
            (request, [b"\0" * 8]),
        ):
            context = CallContext((), None)
            with pytest.raises(grpc.aio.AbortError):
                servicer.start_infer(received, context)
            codes.append(context.code())

    left = left_in_cycles(failed_calls)
    assert codes == [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAVAILABLE]
    assert not {"InvalidInput", "Unavailable", "CallContext", "_UnaryInfer", "frame"} & left, left


INFER = (
    b"POST /v2/models/failing/infer HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\n\r\n%s"
)


@pytest.fixture
def failing_repository(tmp_path: Path) -> Path:
    """A repository of one Python model, ``failing``, that raises on every request."""
    RepoBuilder(tmp_path).python("failing", FAILING_MODEL, FAILING_CONFIG)
    return tmp_path


def test_an_http_request_its_model_failed_is_freed(failing_repository: Path) -> None:
    # The engine's error is raised again where the answer is made (a plain function run
    # by the loop's mailbox): its traceback must not keep that frame, and through it the
    # request and its tensors.
    body = b'{"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1, 2]}]}'
    statuses: list[bytes] = []

    async def failed_requests(engine: Engine) -> None:
        front_end = HTTPToolsFrontEnd(
            V2Routes(DataPlane(engine, version="test")), "127.0.0.1", 0, max_body_bytes=1 << 20
        )
        await front_end.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", front_end.port)
            for _ in range(3):
                writer.write(INFER % (len(body), body))
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
                statuses.append(head.split(b" ", 2)[1])
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
            writer.close()
            await writer.wait_closed()
        finally:
            await front_end.stop(timeout=5)

    with Engine.from_repository(failing_repository) as engine:
        left = left_in_cycles(lambda: asyncio.run(failed_requests(engine)))
    assert statuses == [b"500"] * 3
    assert not {"InferLife", "ParsedRequest", "InferenceRequest", "RuntimeError"} & left, left


def test_a_grpc_call_its_model_failed_is_freed(failing_repository: Path) -> None:
    # ModelInfer as grpcio's transport awaits it: the engine's error is raised in the
    # coroutine, whose frame holds the future that holds the error; and grpcio keeps the
    # abort's traceback (this frame too) in a cycle of its own, so the frame must hold
    # nothing of the call by then.
    request = pb.ModelInferRequest(model_name="failing")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[2])
    codes = []

    async def failed_calls(servicer: InferenceServicer) -> None:
        for _ in range(3):
            context = CallContext((), None)
            with pytest.raises(grpc.aio.AbortError):
                await servicer.ModelInfer((request, [bytes(8)]), context)
            codes.append(context.code())

    with Engine.from_repository(failing_repository) as engine:
        servicer = InferenceServicer(DataPlane(engine, version="test"))
        left = left_in_cycles(lambda: asyncio.run(failed_calls(servicer)))
    assert codes == [grpc.StatusCode.INTERNAL] * 3
    assert not {"RuntimeError", "ModelError", "InferFuture", "InferCall", "frame"} & left, left
