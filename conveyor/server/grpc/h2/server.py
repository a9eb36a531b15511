"""Listen, accept HTTP/2 connections, drain them: Conveyor's own gRPC transport's server.

:class:`GrpcService` is what every connection shares: the method table (by path), the
bearer-token check, the message size limit and the set of open connections, so a stop can
send each one GOAWAY, wait for running calls, then cancel what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl

from conveyor.protocol.grpc.methods import METHODS
from conveyor.server.auth import BearerAuth
from conveyor.server.grpc.h2.connection import GrpcConnection
from conveyor.server.grpc.h2.limits import Limits
from conveyor.server.grpc.service import Bound


class GrpcService:
    def __init__(
        self,
        methods: dict[str, Bound],
        max_message: int,
        auth: BearerAuth | None,
        limits: Limits | None = None,
    ) -> None:
        self.methods = {METHODS[name].path: bound for name, bound in methods.items()}
        self.max_message = max_message
        self.limits = limits or Limits()
        self.auth = auth
        self.connections: set[GrpcConnection] = set()
        self.draining = False
        self._idle: asyncio.Future[None] | None = None  # set when the last call ends

    def call_ended(self, connection: GrpcConnection) -> None:
        if connection.closing and connection.idle:
            connection.close()

    def connection_closed(self, connection: GrpcConnection) -> None:
        if self._idle is not None and not self._idle.done() and not self.connections:
            self._idle.set_result(None)

    async def drain(self, grace: float | None) -> None:
        """GOAWAY to every connection; wait up to ``grace`` s for their calls to end (each
        connection closes once it has none), then cancel what still runs."""
        self.draining = True
        self._idle = asyncio.get_running_loop().create_future()
        for connection in list(self.connections):
            connection.goaway()
        if self.connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._idle), grace)
        for connection in list(self.connections):
            connection.cancel_calls()
            connection.close()


class H2Server:
    """A listening gRPC server on the running loop; :meth:`stop` drains it."""

    def __init__(self, service: GrpcService, server: asyncio.Server) -> None:
        self.service = service
        self._server = server

    async def stop(self, grace: float | None) -> None:
        self._server.close()
        await self.service.drain(grace)
        await self._server.wait_closed()


async def start_h2_server(
    service: GrpcService,
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    reuse_port: bool = False,
    backlog: int = 2048,  # as the HTTP port's default: a burst of clients is not dropped
) -> H2Server:
    """Serve ``service`` on ``host:port``; raises OSError if the port is taken."""
    loop = asyncio.get_running_loop()
    if ssl_context is not None:
        ssl_context.set_alpn_protocols(["h2"])
    server = await loop.create_server(
        lambda: GrpcConnection(service),
        host,
        port,
        ssl=ssl_context,
        reuse_port=reuse_port or None,
        backlog=backlog,
        family=socket.AF_INET6 if ":" in host else socket.AF_UNSPEC,
    )
    return H2Server(service, server)
