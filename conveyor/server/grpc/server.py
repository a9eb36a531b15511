"""Build, start and stop the gRPC server on the running asyncio loop.

The server shares the loop (and so the process and the engine) with the HTTP front end;
``grpc.aio`` runs its I/O through that loop, so no thread of ours waits on a socket.
"""

from __future__ import annotations

import grpc

from conveyor.engine import Engine
from conveyor.server.grpc.service import generic_handler
from conveyor.server.grpc.servicer import InferenceServicer

# Matches the HTTP front end's body limit: a 64 MiB message holds a 16M-element FP32 tensor.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


async def start_grpc_server(
    engine: Engine,
    host: str,
    port: int,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> grpc.aio.Server:
    """Serve ``inference.GRPCInferenceService`` for ``engine`` on ``host:port``; return the server.

    Messages larger than ``max_message_bytes`` either way are refused by gRPC itself
    (RESOURCE_EXHAUSTED) before any of it is parsed. Raises OSError if the port is taken.
    """
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            # gRPC sets SO_REUSEPORT by default, which lets a second server bind a port that is
            # already serving and silently share its traffic; fail loudly instead.
            ("grpc.so_reuseport", 0),
        ]
    )
    server.add_generic_rpc_handlers((generic_handler(InferenceServicer(engine).implementations()),))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as exc:  # newer grpcio raises instead of returning 0
        raise OSError(f"cannot serve gRPC on {address}: {exc}") from None
    if bound == 0:
        raise OSError(f"cannot serve gRPC on {address}: the address is in use or invalid")
    await server.start()
    return server


async def stop_grpc_server(server: grpc.aio.Server, grace: float | None = 5.0) -> None:
    """Refuse new RPCs, let running ones finish for up to ``grace`` seconds, then cancel them."""
    await server.stop(grace)
