"""What the server runs: front ends with ``start()`` and ``stop()``, and one for ASGI apps.

:class:`Server` holds a list of front ends (HTTP, metrics, gRPC, ...). Each binds its own
port in ``start()`` and, in ``stop(timeout)``, stops accepting and lets the requests it
holds finish (bounded by ``timeout``) before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import Any, Protocol

import uvicorn

log = logging.getLogger("conveyor.server")


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


class ASGIFrontEnd:
    """An ASGI app served by uvicorn's httptools protocol on our own loop and socket.

    We drive ``uvicorn.Server``'s startup/shutdown ourselves instead of ``serve()``, so
    uvicorn installs no signal handlers and several front ends share one loop. With
    ``header_timeout`` and ``body_timeout`` uvicorn's protocol is swapped for a subclass
    that enforces them (``http/uvicorn_timeouts.py``); stock uvicorn has neither.
    """

    def __init__(
        self,
        name: str,
        app: Any,
        host: str,
        port: int,
        *,
        http: str = "httptools",
        tls: tuple[str, str] | None = None,
        keep_alive_timeout: float = 30.0,
        header_timeout: float | None = None,
        body_timeout: float | None = None,
    ) -> None:
        self.name = name
        protocol: Any = http
        if header_timeout is not None and body_timeout is not None:
            from conveyor.server.http.uvicorn_timeouts import timed_protocol

            protocol = timed_protocol(http, header_timeout, body_timeout)
        self._host = host
        self._port = port
        self._tls = tls is not None
        self._config = uvicorn.Config(
            app,
            host=host,
            port=port,
            http=protocol,  # httptools measured fastest (bench/http_stack.py)
            lifespan="off",
            # We listen on our own socket and trust no proxy: skip uvicorn's header rewriting.
            proxy_headers=False,
            access_log=False,
            log_config=None,
            server_header=False,
            # Keep idle connections open long enough for benchmark clients and kubelet probes.
            timeout_keep_alive=int(max(1, keep_alive_timeout)),
            ssl_certfile=tls[0] if tls else None,
            ssl_keyfile=tls[1] if tls else None,
        )
        self._server = uvicorn.Server(self._config)
        self._socket: socket.socket | None = None
        self._ticker: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self._socket.getsockname()[1] if self._socket is not None else self._port

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{'https' if self._tls else 'http'}://{host}:{self.port}"

    async def start(self) -> None:
        self._socket = bind(self._host, self._port)
        self._config.load()
        self._server.lifespan = self._config.lifespan_class(self._config)
        await self._server.startup(sockets=[self._socket])
        self._ticker = asyncio.create_task(self._tick(), name=f"{self.name}-tick")
        log.info("%s listening on %s", self.name, self.url)

    async def _tick(self) -> None:
        # uvicorn's on_tick refreshes the Date header once a second.
        counter = 0
        while True:
            await self._server.on_tick(counter)
            counter = (counter + 1) % 864000
            await asyncio.sleep(0.1)

    async def stop(self, timeout: float) -> None:
        """Close the listener and idle connections; wait (bounded) for in-flight requests."""
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if not self._server.started:
            return
        # uvicorn annotates an int but hands it to asyncio.timeout(), which takes any float.
        self._config.timeout_graceful_shutdown = timeout  # type: ignore[assignment]
        await self._server.shutdown(sockets=[self._socket] if self._socket else None)
        log.info("%s stopped", self.name)
