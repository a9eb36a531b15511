"""What the server runs: front ends with ``start()`` and ``stop()``, and the socket they bind.

:class:`Server` holds a list of front ends (HTTP, metrics, gRPC, ...). Each binds its own
port in ``start()`` and, in ``stop(timeout)``, stops accepting and lets the requests it
holds finish (bounded by ``timeout``) before it returns.
"""

from __future__ import annotations

import socket
from typing import Protocol


class FrontEnd(Protocol):
    name: str

    @property
    def url(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self, timeout: float) -> None: ...


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on (host, port); OSError says which port failed."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock
