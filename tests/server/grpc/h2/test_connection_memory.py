"""A closed connection is freed as soon as it closes, by reference counting alone: with the
cycle collector off, nothing of it (its core, its calls) is left behind.

In-process: the transport's own server (``start_h2_server``) on this test's loop, and a
socket client; a ``conveyor serve`` process could not show which objects remain.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator

import hpack
import pytest
from hyperframe import frame as hf

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.server.grpc.h2.calls import Call
from conveyor.server.grpc.h2.connection import GrpcConnection
from conveyor.server.grpc.h2.core import H2Core
from conveyor.server.grpc.h2.limits import Limits
from conveyor.server.grpc.h2.server import GrpcService, start_h2_server
from conveyor.server.grpc.service import bind

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SERVICE = "/inference.GRPCInferenceService/"


def request(method: str) -> list[tuple[str, str]]:
    return [
        (":method", "POST"), (":scheme", "http"), (":path", SERVICE + method),
        (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
    ]  # fmt: skip


async def server_live(request: pb.ServerLiveRequest, context: object) -> pb.ServerLiveResponse:
    return pb.ServerLiveResponse(live=True)


async def echo_stream(requests: AsyncIterator[object], context: object) -> AsyncIterator[object]:
    async for _ in requests:
        yield pb.ModelStreamInferResponse(error_message="echo")
        await asyncio.sleep(0)


async def one_connection(
    service: GrpcService, port: int, method: str, ending: str
) -> weakref.ref[GrpcConnection]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    block = hpack.Encoder().encode(request(method))
    message = hf.DataFrame(1, b"\x00\x00\x00\x00\x00").serialize()
    frames = [hf.HeadersFrame(1, block, flags=["END_HEADERS"]).serialize(), message]
    if method == "ModelStreamInfer":
        frames.append(message)  # two requests, two answers
    if ending == "end":
        frames.append(hf.DataFrame(1, b"", flags=["END_STREAM"]).serialize())
    writer.write(PREFACE + hf.SettingsFrame(0).serialize() + b"".join(frames))
    await writer.drain()
    for _ in range(100):
        if service.connections:
            break
        await asyncio.sleep(0.01)
    (connection,) = service.connections
    ref = weakref.ref(connection)
    del connection
    answer = b""
    expected = b"grpc-status" if ending == "end" else b"echo"
    while expected not in answer:
        chunk = await asyncio.wait_for(reader.read(65536), 10)
        assert chunk, answer
        answer += chunk
    if ending == "reset":
        writer.write(hf.RstStreamFrame(1, error_code=8).serialize())
        await writer.drain()
        await asyncio.sleep(0.05)
    writer.close()
    await writer.wait_closed()
    for _ in range(200):
        if not service.connections:
            break
        await asyncio.sleep(0.01)
    assert not service.connections
    await asyncio.sleep(0.05)  # the loop lets go of the transport's last callbacks
    return ref


@pytest.mark.parametrize(
    ("method", "ending"),
    [("ServerLive", "end"), ("NoSuchMethod", "end"), ("ModelStreamInfer", "end"),
     ("ModelStreamInfer", "reset"), ("ModelStreamInfer", "close")],
)  # fmt: skip
def test_a_closed_connection_is_freed_without_the_cycle_collector(method: str, ending: str) -> None:
    """``ending``: the client ends its stream, resets it, or closes the connection."""

    async def main() -> weakref.ref[GrpcConnection]:
        methods = bind({"ServerLive": server_live, "ModelStreamInfer": echo_stream})
        service = GrpcService(methods, 1 << 20, None)
        server = await start_h2_server(service, "127.0.0.1", 0)
        port = server._server.sockets[0].getsockname()[1]
        try:
            return await one_connection(service, port, method, ending)
        finally:
            await server.stop(0.1)

    gc.collect()
    gc.disable()
    try:
        ref = asyncio.run(main())
        assert ref() is None, gc.get_referrers(ref())
        assert not [o for o in gc.get_objects() if isinstance(o, Call | H2Core)]
    finally:
        gc.enable()


def test_an_idle_connection_gets_goaway_and_is_closed_after_the_idle_timeout() -> None:
    async def main() -> tuple[bytes, float]:
        service = GrpcService({}, 1 << 20, None, Limits(idle_timeout=0.3))
        server = await start_h2_server(service, "127.0.0.1", 0)
        port = server._server.sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(PREFACE + hf.SettingsFrame(0).serialize())
            start = asyncio.get_running_loop().time()
            received = b""
            while chunk := await asyncio.wait_for(reader.read(65536), 10):
                received += chunk
            writer.close()
            return received, asyncio.get_running_loop().time() - start
        finally:
            await server.stop(0.1)

    received, waited = asyncio.run(main())
    assert 0.25 < waited < 5
    kinds = []
    at = 0
    while at + 9 <= len(received):
        length = int.from_bytes(received[at : at + 3], "big")
        kinds.append(received[at + 3])
        at += 9 + length
    assert 0x7 in kinds  # GOAWAY before the close
