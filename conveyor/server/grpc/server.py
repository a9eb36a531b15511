"""Build, start and stop the gRPC server on the running asyncio loop.

The server shares the loop (and so the process and the data plane) with the HTTP front end.
Two transports serve the same servicer: Conveyor's own HTTP/2 protocol
(:mod:`conveyor.server.grpc.h2`, the default, several times cheaper per call) and grpcio's
``grpc.aio`` server, which runs its I/O through that loop too. Neither has a thread of ours
wait on a socket.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import grpc

from conveyor.protocol.limits import DEFAULT_MAX_MESSAGE_BYTES
from conveyor.server import frontend
from conveyor.server.auth import BearerAuth
from conveyor.server.dataplane import DataPlane
from conveyor.server.frontend import PortUnavailable
from conveyor.server.grpc.auth import TokenInterceptor
from conveyor.server.grpc.h2.limits import Limits
from conveyor.server.grpc.service import bind, generic_handler
from conveyor.server.grpc.servicer import InferenceServicer
from conveyor.server.stream_send import DEFAULT_STREAM_SEND_TIMEOUT_S

if TYPE_CHECKING:
    from conveyor.server.grpc.h2.server import H2Server

log = logging.getLogger("conveyor.server.grpc")


@dataclasses.dataclass(frozen=True, slots=True)
class GrpcListen:
    """Where and how the gRPC port listens, on either transport.

    Messages larger than ``max_message_bytes`` either way are refused by gRPC itself
    (RESOURCE_EXHAUSTED) before any of it is parsed. With ``auth``, calls other than
    ServerLive/ServerReady need the bearer token; with ``tls`` (certificate file, key file)
    the port speaks TLS only. ``reuse_port``: share the port with other processes that bind
    it so (front-end processes, see ``conveyor.server.workers``). ``limits``: what one
    connection may cost.
    """

    host: str
    port: int
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    auth: BearerAuth | None = None
    tls: tuple[str, str] | None = None
    reuse_port: bool = False
    limits: Limits = dataclasses.field(default_factory=Limits)


async def start_grpc_server(servicer: InferenceServicer, listen: GrpcListen) -> grpc.aio.Server:
    """Serve ``inference.GRPCInferenceService`` through ``servicer`` on grpcio's server (the
    limits become its channel arguments). Returns the started server; raises
    PortUnavailable if the port is taken.
    """
    host, port, auth, limits = listen.host, listen.port, listen.auth, listen.limits
    max_message_bytes, reuse_port, tls = listen.max_message_bytes, listen.reuse_port, listen.tls
    server = grpc.aio.server(
        interceptors=[TokenInterceptor(auth)] if auth is not None else None,
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            # gRPC sets SO_REUSEPORT by default, which lets a second server bind a port that is
            # already serving and silently share its traffic; fail loudly instead.
            ("grpc.so_reuseport", int(reuse_port)),
            ("grpc.max_concurrent_streams", limits.max_concurrent_streams),
            ("grpc.max_metadata_size", limits.max_header_list_bytes),
            ("grpc.absolute_max_metadata_size", limits.max_header_list_bytes),
            *_timeouts(limits),
        ],
    )
    server.add_generic_rpc_handlers(
        (generic_handler(servicer.implementations(), servicer.codecs(), servicer.data.access_log),)
    )
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        if tls is not None:
            from conveyor.server.tls import read_pair

            cert, key = read_pair(*tls)
            credentials = grpc.ssl_server_credentials([(key, cert)])
            bound = server.add_secure_port(address, credentials)
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError as exc:  # newer grpcio raises instead of returning 0
        raise _why_not(host, port, str(exc)) from None
    if bound == 0:
        raise _why_not(host, port, "")
    await server.start()
    return server


def _timeouts(limits: Limits) -> list[tuple[str, int]]:
    """The handshake and idle timeouts as grpcio's channel arguments (0: grpcio's default)."""
    options = []
    if limits.handshake_timeout:
        options.append(("grpc.server_handshake_timeout_ms", int(limits.handshake_timeout * 1000)))
    if limits.idle_timeout:
        options.append(("grpc.max_connection_idle_ms", int(limits.idle_timeout * 1000)))
    return options


def _why_not(host: str, port: int, detail: str) -> PortUnavailable:
    """grpcio says only that it could not bind: binding a socket of our own there finds the
    system's reason (say, "Address already in use")."""
    try:
        frontend.bind(host, port, "gRPC").close()
    except PortUnavailable as exc:
        return exc
    return PortUnavailable("gRPC", host, port, None, detail)


async def start_conveyor_grpc_server(servicer: InferenceServicer, listen: GrpcListen) -> H2Server:
    """:func:`start_grpc_server`'s twin on Conveyor's own HTTP/2 transport: same arguments,
    same answers (TLS negotiates ALPN "h2")."""
    from conveyor.server.grpc.h2.server import GrpcService, start_h2_server

    methods = bind(
        servicer.implementations(), servicer.codecs(), servicer.data.access_log, servicer.starts()
    )
    service = GrpcService(methods, listen.max_message_bytes, listen.auth, listen.limits)
    host, port, tls = listen.host, listen.port, listen.tls
    ssl_context = None
    if tls is not None:
        from conveyor.server.tls import server_context

        ssl_context = server_context(*tls)
    try:
        return await start_h2_server(
            service, host, port, ssl_context=ssl_context, reuse_port=listen.reuse_port
        )
    except OSError as exc:
        # The system's words for the errno ("Address already in use"), not asyncio's long ones.
        detail = "" if exc.errno else str(exc)
        raise PortUnavailable("gRPC", host, port, exc.errno, detail) from None


async def stop_grpc_server(server: grpc.aio.Server | H2Server, grace: float | None = 5.0) -> None:
    """Refuse new RPCs, let running ones finish for up to ``grace`` seconds, then cancel them."""
    await server.stop(grace)


class GRPCFrontEnd:
    """The gRPC server as one of :class:`conveyor.server.server.Server`'s front ends."""

    name = "grpc"

    def __init__(
        self,
        data: DataPlane,
        host: str,
        port: int,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        auth: BearerAuth | None = None,
        tls: tuple[str, str] | None = None,
        reuse_port: bool = False,
        transport: str = "conveyor",
        limits: Limits | None = None,
        stream_send_timeout: float = DEFAULT_STREAM_SEND_TIMEOUT_S,
    ) -> None:
        if transport not in ("conveyor", "grpcio"):
            raise ValueError(f"transport must be 'conveyor' or 'grpcio', got {transport!r}")
        self._transport = transport
        self._data = data
        self._listen = GrpcListen(
            host, port, max_message_bytes, auth, tls, reuse_port, limits or Limits()
        )
        self._stream_send_timeout = stream_send_timeout
        self._server: grpc.aio.Server | H2Server | None = None
        self._servicer: InferenceServicer | None = None

    @property
    def url(self) -> str:
        host = self._listen.host
        return f"grpc://{f'[{host}]' if ':' in host else host}:{self._listen.port}"

    async def start(self) -> None:
        # Kept, so a drain can end its open streams.
        self._servicer = InferenceServicer(self._data, self._stream_send_timeout)
        start = start_conveyor_grpc_server if self._transport == "conveyor" else start_grpc_server
        self._server = await start(self._servicer, self._listen)
        log.info("%s listening on %s (%s transport)", self.name, self.url, self._transport)

    async def stop(self, timeout: float) -> None:
        """Refuse new RPCs; give running ones (and open streams) ``timeout`` s to finish."""
        if self._server is not None:
            if self._servicer is not None:
                self._servicer.end_streams()
            await stop_grpc_server(self._server, timeout)
            self._server = None
            log.info("%s stopped", self.name)
