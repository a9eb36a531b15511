"""The V2 REST routes: parse the path, call the engine, answer with JSON (+ binary).

Handlers only translate: the engine does the work, ``conveyor.protocol`` does the formats,
``errors.error_response`` maps failures to statuses. Nothing here waits on compute: the
infer handler awaits the engine's future, so the event loop keeps taking requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

from conveyor.engine import ModelState
from conveyor.errors import (
    ConveyorError,
    InvalidInput,
    ModelNotFound,
    ModelNotReady,
    Unsupported,
)
from conveyor.protocol import infer, metadata
from conveyor.protocol.binary import parse_header_length
from conveyor.protocol.json_codec import dumps, loads
from conveyor.server.http.errors import error_body
from conveyor.server.state import ServerState

if TYPE_CHECKING:
    from conveyor.engine import Engine
    from conveyor.futures import InferFuture, Outputs
    from conveyor.server.metrics import LatencyHistograms

Headers = list[tuple[bytes, bytes]]
# status, body, headers (content-type and any extras; the adapter adds content-length)
Reply = tuple[int, bytes, Headers]
ReadBody = Callable[[], Awaitable[bytes]]

JSON: Headers = [(b"content-type", b"application/json")]
BINARY_TYPE = (b"content-type", b"application/octet-stream")
HEADER_LENGTH = b"inference-header-content-length"
EMPTY_OK: Reply = (200, b"", [])


class NotFoundRoute(ConveyorError):
    """No such route (a 404 that is not about a model)."""

    kind = ModelNotFound.kind


class V2Routes:
    """Every V2 route, over an engine that appears once its models are loaded."""

    def __init__(
        self,
        state: ServerState,
        *,
        version: str,
        extensions: tuple[str, ...] = metadata.EXTENSIONS,
        histograms: LatencyHistograms | None = None,
    ) -> None:
        self.state = state
        self._server_metadata = dumps(metadata.server_metadata(version, extensions))
        # The OpenAPI description of these routes, shipped beside this module.
        self._openapi = resources.files(__package__).joinpath("openapi.json").read_bytes()
        self._histograms = histograms
        self._clock = time.perf_counter

    def _engine(self) -> Engine:
        return self.state.require_engine()

    async def handle(
        self, method: str, path: str, read_body: ReadBody, header_length: bytes | None
    ) -> Reply:
        parts = path.split("/")
        if len(parts) < 2 or parts[1] != "v2" or parts[0]:
            raise NotFoundRoute(f"no route {path!r}; V2 routes start with /v2")
        if len(parts) >= 4 and parts[2] == "models":
            if method == "POST" and parts[-1] == "infer":
                pending = self.begin_infer(path, await read_body(), header_length)
                try:
                    results = await pending.future
                except asyncio.CancelledError:
                    pending.future.cancel()  # dropped while still queued: it never runs
                    raise
                return pending.reply(results)
            return await self._models(method, parts, path)
        route = "/".join(parts[2:])
        if route == "" and method == "GET":
            return 200, self._server_metadata, JSON
        if route == "health/live" and method == "GET":
            return EMPTY_OK
        if route == "health/ready" and method == "GET":
            return self._server_ready()
        if route == "openapi.json" and method == "GET":
            return 200, self._openapi, JSON
        if route == "repository/index" and method == "POST":
            return self._repository_index(await read_body())
        if (
            len(parts) == 6
            and parts[2:4] == ["repository", "models"]
            and parts[5] in ("load", "unload")
            and method == "POST"
        ):
            return await self._load_or_unload(parts[4], parts[5], await read_body())
        raise NotFoundRoute(f"no route {method} {path}")

    # -- health and metadata --------------------------------------------------------------

    def _server_ready(self) -> Reply:
        reason = self.state.not_ready_reason()
        if reason is None:
            return EMPTY_OK
        # 400, not 503, as Triton answers; the body says why.
        return 400, error_body(f"server is not ready: {reason}"), JSON

    async def _models(self, method: str, parts: list[str], path: str) -> Reply:
        if method != "GET":
            raise NotFoundRoute(f"no route {method} {path}")
        engine = self._engine()
        if len(parts) == 4 and parts[3] == "stats":
            return 200, dumps(metadata.statistics(engine.statistics())), JSON
        action = ""
        if len(parts) in (5, 7):
            action = parts[-1]
            parts = parts[:-1]
        model, version = _model_and_version([*parts, "x"], path)
        if action == "":
            info = engine.model(model, version)
            versions = engine.model_versions(model)
            body = metadata.model_metadata(info.config, info.platform, versions)
            return 200, dumps(body), JSON
        if action == "ready":
            try:
                ready = engine.model(model, version).ready and not self.state.draining
            except ModelNotReady as exc:
                return 400, error_body(exc.message), JSON
            if ready:
                return EMPTY_OK
            return 400, error_body(f"model {model!r} is not ready"), JSON
        if action == "config":
            info = engine.model(model, version)
            config = metadata.model_config(info.config, info.platform, info.config.instance_count())
            return 200, dumps(config), JSON
        if action == "stats":
            return 200, dumps(metadata.statistics(engine.statistics(model, version))), JSON
        raise NotFoundRoute(f"no route GET {path}")

    # -- repository -----------------------------------------------------------------------

    def _repository_index(self, body: bytes) -> Reply:
        request = _json_object(body, "repository index request")
        ready_only = request.get("ready", False)
        if not isinstance(ready_only, bool):
            raise InvalidInput("repository index 'ready' must be true or false")
        entries = []
        for entry in self._engine().repository_index():
            if ready_only and entry.state is not ModelState.READY:
                continue
            entries.append(
                metadata.repository_entry(entry.name, entry.version, entry.state, entry.reason)
            )
        return 200, dumps(entries), JSON

    async def _load_or_unload(self, model: str, action: str, body: bytes) -> Reply:
        request = _json_object(body, f"{action} request")
        parameters = request.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise InvalidInput(f"{action} request 'parameters' must be an object")
        if action == "load" and any(k == "config" or k.startswith("file:") for k in parameters):
            raise Unsupported(
                "loading a model with a config or files given in the request is not "
                "supported; put them in the model repository"
            )
        engine = self._engine()
        call = engine.load_model if action == "load" else engine.unload_model
        # Loading and draining block for a long time: never on the event loop.
        await asyncio.get_running_loop().run_in_executor(None, call, model)
        return EMPTY_OK

    # -- inference ------------------------------------------------------------------------

    def begin_infer(self, path: str, body: bytes, header_length: bytes | None) -> PendingInfer:
        """Decode and submit an infer request (``path`` ends in /infer); does not wait.

        Raises for a bad request; the returned future completes on an engine thread.
        """
        started = self._clock()
        model, version = _model_and_version(path.split("/"), path)
        engine = self._engine()
        served = str(engine.model(model, version).version)
        request = infer.decode_request(body, parse_header_length(header_length, len(body)))
        options = request.options
        future = engine.submit(
            model,
            request.inputs,
            version=version,
            outputs=request.outputs,
            priority=options.priority,
            timeout=options.timeout,
            request_id=request.id,
        )
        return PendingInfer(future, model, served, request, started, self)

    def _observe(self, model: str, version: str, started: float) -> None:
        if self._histograms is not None:
            self._histograms.observe(model, version, self._clock() - started)


class PendingInfer:
    """A submitted infer request: its engine future, and how to answer once it completes."""

    __slots__ = ("_routes", "future", "model", "request", "served", "started")

    def __init__(
        self,
        future: InferFuture,
        model: str,
        served: str,
        request: infer.InferRequest,
        started: float,
        routes: V2Routes,
    ) -> None:
        self.future = future
        self.model = model
        self.served = served
        self.request = request
        self.started = started
        self._routes = routes

    def reply(self, results: Outputs) -> Reply:
        body, json_length = infer.encode_response(self.model, self.served, self.request, results)
        self._routes._observe(self.model, self.served, self.started)
        if json_length is None:
            return 200, body, JSON
        return 200, body, [BINARY_TYPE, (HEADER_LENGTH, b"%d" % json_length)]


def _model_and_version(parts: list[str], path: str) -> tuple[str, str | None]:
    """``['', 'v2', 'models', m, ('versions', v,)? action]`` -> (m, v or None)."""
    if len(parts) == 5 and parts[3]:
        return parts[3], None
    if len(parts) == 7 and parts[3] and parts[4] == "versions" and parts[5]:
        return parts[3], parts[5]
    raise NotFoundRoute(f"no route {path!r}")


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    if not body.strip():
        return {}
    value = loads(body, what)
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object")
    return value
