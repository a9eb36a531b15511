"""The server process: one event loop hosting every front end over one engine.

The lifecycle is explicit, as in uvicorn: ``serve()`` installs the signal handlers (and is
the only place that does), then ``startup()`` -> ``main_loop()`` -> ``shutdown()``.

- startup: the front ends bind their ports first, so ``/v2/health/live`` answers while
  the models load and ``/v2/health/ready`` says 400 until they are ready; then the engine
  loads the repository on a worker thread.
- SIGTERM / SIGINT: stop accepting, let every admitted request finish and be answered
  (bounded by ``drain_timeout``), close the engine (which drains its queues), exit 0.
  A second signal skips the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
import sys
from collections.abc import Callable

from conveyor.engine import Engine, ModelControl
from conveyor.engine.polling import RepositoryPoller
from conveyor.server.access_log import AccessLog
from conveyor.server.auth import BearerAuth
from conveyor.server.dataplane import DataPlane
from conveyor.server.frontend import FrontEnd, PortUnavailable
from conveyor.server.grpc.server import GRPCFrontEnd
from conveyor.server.http.listener import HTTPToolsFrontEnd
from conveyor.server.http.routes import V2Routes
from conveyor.server.log_output import LogControl
from conveyor.server.malloc_tuning import trim_periodically, tune_malloc
from conveyor.server.metrics import LatencyHistograms
from conveyor.server.metrics_port import metrics_front_end
from conveyor.server.settings import Settings
from conveyor.server.shared_memory import Owners, SharedMemoryRegistry
from conveyor.server.tls import server_context
from conveyor.server.tracing.tracer import Tracer

log = logging.getLogger("conveyor.server")

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Server:
    """``Server(settings).run()`` serves until SIGTERM/SIGINT and returns the exit code."""

    def __init__(
        self, settings: Settings, *, engine_factory: Callable[[], Engine] | None = None
    ) -> None:
        from conveyor._version import package_version

        self.settings = settings
        self.started = False
        self.should_exit = False
        self.force_exit = False
        self.histograms = LatencyHistograms()
        shared_memory_off = settings.shared_memory_off()
        # Applied to the ``conveyor`` loggers in serve(), not here (no side effects on build).
        self.log_control = LogControl(settings.log_settings(), AccessLog())
        self.engine: Engine | None = None  # once loaded; closed on shutdown
        # The engine (once loaded), readiness and every answer, shared by every front end.
        self.data_plane = DataPlane(
            version=package_version(),
            strict_readiness=settings.strict_readiness,
            histograms=self.histograms,
            shared_memory=(
                SharedMemoryRegistry(owners=Owners.of(*settings.shared_memory_owners()))
                if shared_memory_off is None
                else None
            ),
            shared_memory_off=shared_memory_off or "",
            log_control=self.log_control,
            tracer=_tracer(settings),
        )
        self.routes = V2Routes(self.data_plane)
        self.front_ends: list[FrontEnd] = []
        self._engine_factory = engine_factory or self._engine_from_settings
        self._wake: asyncio.Event | None = None
        self._poller: RepositoryPoller | None = None

    # -- running ----------------------------------------------------------------------------

    def run(self) -> int:
        tune_malloc()  # large tensors reuse heap memory instead of fresh pages each time
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            return runner.run(self.serve())

    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        try:
            self.log_control.install()
        except OSError as exc:  # --log-file cannot be opened: there is nowhere to log it
            print(f"conveyor serve: cannot write the log file: {exc}", file=sys.stderr)
            return 1
        self._wake = asyncio.Event()
        for sig in HANDLED_SIGNALS:
            loop.add_signal_handler(sig, self.handle_exit, sig)
        try:
            try:
                await self.startup()
            except PortUnavailable as exc:
                log.error("%s", cannot_listen(exc))  # one line that says what to change
                return 1
            except Exception as exc:
                log.error("server failed to start: %s", exc)
                return 1
            if not self.should_exit:
                await self.main_loop()
            return 0
        finally:
            await self.shutdown()
            for sig in HANDLED_SIGNALS:
                loop.remove_signal_handler(sig)
            self.log_control.close()

    def handle_exit(self, sig: int) -> None:
        if self.should_exit:
            log.warning("second %s: not waiting for in-flight requests", signal.Signals(sig).name)
            self.force_exit = True
        else:
            log.info("%s: draining, then exiting", signal.Signals(sig).name)
        self.should_exit = True
        if self._wake is not None:
            self._wake.set()

    # -- lifecycle --------------------------------------------------------------------------

    def build_front_ends(self) -> list[FrontEnd]:
        """Every front end this server runs; a new protocol adds itself to
        :func:`protocol_front_ends`. With more than one front end (``workers``; 0 is one
        per core), or ``front_end_process``, HTTP and gRPC run in front-end processes
        instead (see ``conveyor.server.workers``)."""
        s = self.settings
        front_ends: list[FrontEnd]
        count = s.workers
        if count == 0:
            from conveyor.server.workers.pool import default_count

            count = default_count()
        # --workers 0 on one core is one front end: in this process, as --workers 1, since a
        # front-end process would add its hop and gain no core.
        if count == 1 and not s.front_end_process:
            front_ends = protocol_front_ends(s, self.data_plane, routes=self.routes)
        else:
            # Only a server with front-end processes loads their machinery.
            from conveyor.server.workers.pool import FrontEndPool

            front_ends = [FrontEndPool(self.data_plane, s, count)]
        if s.metrics:
            auth = BearerAuth(s.auth_token) if s.auth_token is not None else None
            tls = (s.tls_cert, s.tls_key) if s.tls_cert and s.tls_key else None
            front_ends.append(
                metrics_front_end(
                    lambda: self.engine,
                    self.histograms,
                    s.host,
                    s.metrics_port,
                    auth=auth,
                    ssl_context=server_context(*tls) if tls is not None else None,
                    header_timeout=s.http_header_timeout,
                    body_timeout=s.http_body_timeout,
                    keep_alive_timeout=s.http_keep_alive_timeout,
                    backlog=s.backlog,
                )
            )
        return front_ends

    async def startup(self) -> None:
        self.front_ends = self.build_front_ends()
        for front_end in self.front_ends:
            await front_end.start()
            self.started = True
        loop = asyncio.get_running_loop()
        # Loading models blocks for seconds: on a worker thread, while /v2/health/live answers.
        engine = await loop.run_in_executor(None, self._engine_factory)
        self.engine = engine
        self.data_plane.engine = engine
        if engine.model_control is ModelControl.POLL:
            self._poller = RepositoryPoller(engine, self.settings.poll_interval)
            self._poller.start()
            log.info("polling the repository every %g s", self.settings.poll_interval)
        self._log_readiness(engine)
        for front_end in self.front_ends:
            if front_end.name == "metrics":
                log.info("dashboard: %s/", front_end.url)

    def _log_readiness(self, engine: Engine) -> None:
        """Say what /v2/health/ready now answers: the log and the endpoint never disagree."""
        names = ", ".join(engine.model_names()) or "none"
        failed = ", ".join(e.name for e in engine.failed_models())
        reason = self.data_plane.not_ready_reason()
        if reason is None:
            log.info("ready: serving %s%s", names, f" (failed to load: {failed})" if failed else "")
            return
        log.warning(
            "not ready (/v2/health/ready answers 400): %s; serving %s; with "
            "--no-strict-readiness a model that failed to load leaves the server ready",
            reason,
            names,
        )

    def _engine_from_settings(self) -> Engine:
        s = self.settings
        return Engine.from_repository(
            s.repository,
            model_control=s.model_control,
            startup_models=list(s.load_model),
            gpu_instances_on_cpu=s.gpu_instances_on_cpu,
        )

    async def main_loop(self) -> None:
        assert self._wake is not None
        trimming = asyncio.create_task(trim_periodically())
        try:
            await self._wake.wait()
        finally:
            trimming.cancel()

    async def shutdown(self) -> None:
        """Stop accepting, finish and answer admitted requests, close the engine."""
        self.data_plane.draining = True
        timeout = 0.0 if self.force_exit else self.settings.drain_timeout
        serving = [f for f in self.front_ends if f.name != "metrics"]
        # Metrics keep answering until the end, so a scrape can watch the drain.
        await asyncio.gather(*(f.stop(timeout) for f in serving), return_exceptions=True)
        engine = self.engine
        loop = asyncio.get_running_loop()
        if self._poller is not None:
            # No load may start (or be half-installed) while the engine closes.
            await loop.run_in_executor(None, self._poller.stop, timeout)
            self._poller = None
        if engine is not None:
            await loop.run_in_executor(None, engine.close, timeout)
        self.data_plane.close()  # every shared-memory region: unmapped, descriptors closed
        for front_end in self.front_ends:
            if front_end not in serving:
                with contextlib.suppress(Exception):
                    await front_end.stop(0.5)
        self.front_ends = []


# The option of ``conveyor serve`` that moves each front end to another port.
PORT_OPTIONS = {"HTTP": "--http-port", "gRPC": "--grpc-port", "metrics": "--metrics-port"}


def cannot_listen(exc: PortUnavailable) -> str:
    """Why a front end could not listen, and which option changes it, on one line."""
    option = PORT_OPTIONS.get(exc.front_end, "its port option")
    if exc.front_end == "metrics":
        option += " (or turn metrics off with --no-metrics)"
    if exc.errno == errno.EADDRNOTAVAIL:
        fix = f"{exc.host!r} is not an address of this machine: choose another with --host"
    elif exc.errno == errno.EADDRINUSE:
        fix = f"another program is listening there: stop it, or choose another port with {option}"
    else:
        fix = f"choose another port with {option}"
    return f"{exc}; {fix}"


def _tracer(settings: Settings) -> Tracer:
    tracing = settings.tracing()
    return Tracer(tracing.settings, otel_endpoint=tracing.otel_endpoint)


def protocol_front_ends(
    s: Settings,
    data_plane: DataPlane,
    *,
    routes: V2Routes | None = None,
    http_socket: socket.socket | None = None,
    grpc_port: int | None = None,
) -> list[FrontEnd]:
    """HTTP and gRPC over ``data_plane``; ``http_socket``: an already listening socket
    (a front-end process's, inherited), ``grpc_port``: the port to bind instead of the
    settings' one."""
    auth = BearerAuth(s.auth_token) if s.auth_token is not None else None
    tls = (s.tls_cert, s.tls_key) if s.tls_cert is not None and s.tls_key is not None else None
    ssl_context = server_context(*tls) if tls is not None else None
    return [
        HTTPToolsFrontEnd(
            routes or V2Routes(data_plane),
            s.host,
            s.http_port,
            max_body_bytes=s.max_body_bytes,
            auth=auth,
            ssl_context=ssl_context,
            header_timeout=s.http_header_timeout,
            body_timeout=s.http_body_timeout,
            keep_alive_timeout=s.http_keep_alive_timeout,
            backlog=s.backlog,
            sock=http_socket,
            access=data_plane.access_log,
            stream_send_timeout=s.stream_send_timeout,
        ),
        GRPCFrontEnd(
            data_plane,
            s.host,
            s.grpc_port if grpc_port is None else grpc_port,
            max_message_bytes=s.grpc_max_message_bytes,
            limits=s.grpc_limits(),
            auth=auth,
            tls=tls,
            reuse_port=grpc_port is not None,
            transport=s.grpc_transport.value,
            stream_send_timeout=s.stream_send_timeout,
        ),
    ]


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed (faster on the infer path, see docs); else asyncio's."""
    if sys.platform == "win32":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
