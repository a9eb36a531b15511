"""A front-end process: HTTP and gRPC over a :class:`RemoteDataPlane`, until told to stop.

Started by :class:`~conveyor.server.workers.pool.FrontEndPool` as ``python -m
conveyor.server.workers.process`` with a pickled :class:`Launch` on standard input. The
first SIGTERM or SIGINT drains (stop accepting, answer what was admitted, bounded by the
drain timeout) and exits 0; so does losing the engine process.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import signal
import socket
import sys

from conveyor.server.frontend import FrontEnd
from conveyor.server.malloc_tuning import trim_periodically, tune_malloc
from conveyor.server.server import loop_factory, protocol_front_ends
from conveyor.server.workers.launch import Launch
from conveyor.server.workers.remote import RemoteDataPlane

log = logging.getLogger("conveyor.server.workers")


async def serve(launch: Launch) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    data = RemoteDataPlane(
        socket.socket(fileno=launch.control_fd), socket.socket(fileno=launch.calls_fd)
    )
    await data.connect()
    http_socket = socket.socket(fileno=launch.http_fd)
    http_socket.setblocking(False)
    front_ends: list[FrontEnd] = protocol_front_ends(
        launch.settings, data, http_socket=http_socket, grpc_port=launch.grpc_port
    )
    # gRPC binds first: a process that answers HTTP (a readiness probe) serves gRPC too.
    front_ends.reverse()
    for front_end in front_ends:
        await front_end.start()
    trimming = loop.create_task(trim_periodically())
    gone = loop.create_task(data.gone.wait())
    stopped = loop.create_task(stop.wait())
    await asyncio.wait([gone, stopped], return_when=asyncio.FIRST_COMPLETED)
    data.draining = True
    timeout = 0.0 if data.gone.is_set() else launch.settings.drain_timeout
    await asyncio.gather(*(f.stop(timeout) for f in front_ends), return_exceptions=True)
    data.close()
    for task in (gone, stopped, trimming):
        task.cancel()
    return 0


def main() -> int:
    launch: Launch = pickle.load(sys.stdin.buffer)
    logging.basicConfig(
        level=launch.log_level,
        format=f"%(levelname)s %(name)s[front end {launch.index}]: %(message)s",
    )
    tune_malloc()  # as the engine process: large bodies reuse heap memory
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(serve(launch))


if __name__ == "__main__":
    sys.exit(main())
