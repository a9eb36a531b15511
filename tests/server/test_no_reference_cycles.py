"""What a request leaves behind is freed by reference counting alone: with the cycle
collector off, a closed HTTP connection's parser, a refused large gRPC message (its
error, its frames, its megabytes) and a failed gRPC infer call driven by callbacks are
gone, not waiting for the next full collection.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator

import grpc
import pytest

from conveyor.errors import InvalidInput
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.server.dataplane import DataPlane
from conveyor.server.grpc.h2.calls import CallContext
from conveyor.server.grpc.servicer import LARGE_MESSAGE_BYTES, InferenceServicer, LargeMessage
from conveyor.server.http.parser import RequestParser


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def left_in_cycles(work: Callable[[], None]) -> set[str]:
    """The type names of what ``work`` left that only the cycle collector would free."""
    work()
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    return {type(thing).__qualname__ for thing in gc.garbage}


def test_a_closed_connections_parser_is_freed(collector_off: None) -> None:
    def one_connection() -> None:
        parser = RequestParser(max_body_bytes=1 << 20)
        events = parser.feed(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert events  # the request was read
        parser.close()

    assert "RequestParser" not in left_in_cycles(one_connection)


def test_a_large_message_refused_on_its_thread_is_freed(collector_off: None) -> None:
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


def test_a_failed_infer_call_started_without_a_coroutine_is_freed(collector_off: None) -> None:
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
