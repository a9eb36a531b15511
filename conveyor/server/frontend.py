"""What the server runs: front ends with ``start()`` and ``stop()``, and the socket they bind.

:class:`Server` holds a list of front ends (HTTP, metrics, gRPC, ...). Each binds its own
port in ``start()`` and, in ``stop(timeout)``, stops accepting and lets the requests it
holds finish (bounded by ``timeout``) before it returns.
"""

from __future__ import annotations

import os
import socket
from typing import Protocol


class FrontEnd(Protocol):
    name: str

    @property
    def url(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self, timeout: float) -> None: ...


class PortUnavailable(OSError):
    """A front end could not listen on its port (taken, not permitted, not an address here).

    ``front_end`` is what a user calls it (HTTP, gRPC, metrics), so the server can name the
    option that moves it; ``errno`` is the operating system's, when it gave one.
    """

    def __init__(
        self, front_end: str, host: str, port: int, errno: int | None, reason: str = ""
    ) -> None:
        super().__init__(errno, reason or _reason(errno))
        self.front_end = front_end
        self.host = host
        self.port = port
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.message = f"cannot serve {front_end} on {where}: {self.strerror}"

    def __str__(self) -> str:
        return self.message


def _reason(errno: int | None) -> str:
    return os.strerror(errno) if errno else "the port is in use or the address is invalid"


def front_end_label(name: str) -> str:
    """A front end's name as a user calls it: ``http`` -> HTTP, ``grpc`` -> gRPC."""
    return {"http": "HTTP", "grpc": "gRPC"}.get(name, name)


def bind(
    host: str, port: int, front_end: str = "HTTP", *, reuse: int = socket.SO_REUSEADDR
) -> socket.socket:
    """A non-blocking TCP socket bound to (host, port), not yet listening; PortUnavailable
    says which failed. ``reuse``: SO_REUSEADDR, or SO_REUSEPORT to share the port with
    other processes that bind it so."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, reuse, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise PortUnavailable(front_end, host, port, exc.errno) from None
    sock.setblocking(False)
    return sock
