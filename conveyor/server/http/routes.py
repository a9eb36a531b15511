"""The V2 REST routes: parse the path and body, call the data plane, answer JSON (+ binary).

Handlers only translate: :class:`~conveyor.server.dataplane.DataPlane` decides every answer,
``conveyor.protocol`` does the formats, ``errors.error_response`` maps failures to statuses.
Nothing here waits on compute: the infer handler awaits the engine's future, so the event
loop keeps taking requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConveyorError, InvalidInput, MethodNotAllowed, NotFoundRoute
from conveyor.protocol import binary, infer
from conveyor.protocol.json_codec import dumps, loads
from conveyor.server import openai
from conveyor.server.generate import only_response
from conveyor.server.infer_life import InferLife

if TYPE_CHECKING:
    from conveyor.futures import InferFuture, Outputs
    from conveyor.server.dataplane import DataPlane
    from conveyor.server.generate import GenerateResponses

Headers = list[tuple[bytes, bytes]]
# status, body, headers (content-type and any extras; the adapter adds content-length)
Reply = tuple[int, bytes, Headers]
ReadBody = Callable[[], Awaitable[bytes]]

JSON: Headers = [(b"content-type", b"application/json")]
BINARY_TYPE = (b"content-type", b"application/octet-stream")
HEADER_LENGTH = b"inference-header-content-length"
EMPTY_OK: Reply = (200, b"", [])


EVENT_STREAM: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]


class ChunkedReply:
    """A reply whose body is written as it is produced (chunked transfer encoding).

    ``close`` runs once the body ended or the client went away, whichever comes first.
    """

    __slots__ = ("chunks", "close", "headers", "status")

    def __init__(
        self,
        status: int,
        headers: Headers,
        chunks: AsyncIterator[bytes],
        close: Callable[[], None],
    ) -> None:
        self.status = status
        self.headers = headers
        self.chunks = chunks
        self.close = close


async def _events(responses: GenerateResponses) -> AsyncIterator[bytes]:
    """Server-Sent Events, one ``data:`` event per response; an error once the stream
    started (the status is sent already) is an event ``{"error": ...}``, as Triton's."""
    try:
        async for answer in responses:
            yield b"data: " + dumps(answer) + b"\n\n"
    except ConveyorError as exc:
        yield b"data: " + dumps({"error": exc.message}) + b"\n\n"


# HEAD is GET without the body (the transport leaves it out), so every GET route takes it.
_GET, _POST, _BOTH = ("GET", "HEAD"), ("POST",), ("GET", "HEAD", "POST")
# The methods of the routes with no variable part after /v2/.
_FIXED_ROUTES = {
    "": _GET,
    "health/live": _GET,
    "health/ready": _GET,
    "openapi.json": _GET,
    "models/stats": _GET,
    "trace/setting": _BOTH,
    "logging": _BOTH,
    "repository/index": _POST,
}
_MODEL_ACTIONS = {
    "": _GET,
    "ready": _GET,
    "config": _GET,
    "stats": _GET,
    "infer": _POST,
    "generate": _POST,
    "generate_stream": _POST,
}
_SHARED_MEMORY_ACTIONS = {"status": _GET, "register": _POST, "unregister": _POST}


def allowed_methods(parts: list[str]) -> tuple[str, ...]:
    """The methods the route at ``path.split('/')`` takes; () when no route is there."""
    if len(parts) < 2 or parts[0] or parts[1] != "v2":
        return ()
    rest = parts[2:]
    fixed = _FIXED_ROUTES.get("/".join(rest))
    if fixed is not None:
        return fixed
    if rest[:1] == ["models"] and len(rest) >= 2 and rest[1]:
        model_rest = rest[2:]
        if len(model_rest) >= 2 and model_rest[0] == "versions" and model_rest[1]:
            model_rest = model_rest[2:]
        elif model_rest == ["trace", "setting"]:
            return _BOTH
        if len(model_rest) <= 1:
            return _MODEL_ACTIONS.get(model_rest[0] if model_rest else "", ())
        return ()
    if rest[:2] == ["repository", "models"] and len(rest) == 4 and rest[3] in ("load", "unload"):
        return _POST
    if rest[:1] in (["systemsharedmemory"], ["cudasharedmemory"]):
        region = rest[1:-1]
        if region and (region[0] != "region" or len(region) < 2):
            return ()
        if rest[-1] == "register" and not region:
            return ()
        return _SHARED_MEMORY_ACTIONS.get(rest[-1], ())
    return ()


class V2Routes:
    """Every V2 route, as a translation to the data plane's calls."""

    def __init__(self, data: DataPlane) -> None:
        self.data = data
        self.tracer = data.tracer  # its ``on``: the HTTP front end's one check per request
        self._server_metadata = dumps(data.server_metadata())
        # The OpenAPI description of these routes, shipped beside this module.
        self._openapi = resources.files(__package__).joinpath("openapi.json").read_bytes()
        self._clock = time.perf_counter

    async def handle(
        self, method: str, path: str, read_body: ReadBody, header_length: bytes | None
    ) -> Reply | ChunkedReply:
        try:
            return await self._dispatch(
                "GET" if method == "HEAD" else method, path, read_body, header_length
            )
        except NotFoundRoute:
            # A route that is there but takes other methods is 405 (with Allow), not 404.
            allow = allowed_methods(path.split("/"))
            if allow and method not in allow:
                # Triton's words (its whole answer) first, then which methods it takes.
                takes = " or ".join((", ".join(allow[:-1]), allow[-1])) if allow[1:] else allow[0]
                raise MethodNotAllowed(
                    f"Method Not Allowed: {path} takes {takes}, not {method}", allow
                ) from None
            raise

    async def _dispatch(
        self, method: str, path: str, read_body: ReadBody, header_length: bytes | None
    ) -> Reply | ChunkedReply:
        if openai.is_openai_path(path):  # OpenAI's embeddings API: its own errors and shapes
            return await openai.handle(self.data, method, path, read_body)
        parts = path.split("/")
        if len(parts) < 2 or parts[1] != "v2" or parts[0]:
            raise NotFoundRoute(f"no route {path!r}; V2 routes start with /v2")
        if len(parts) >= 4 and parts[2] == "models":
            if method == "POST" and parts[-1] in ("generate", "generate_stream"):
                return await self._generate(parts, path, await read_body())
            if method == "POST" and parts[-1] == "infer":
                pending = self.begin_infer(path, await read_body(), header_length)
                try:
                    results = await pending.future
                except asyncio.CancelledError:
                    pending.future.cancel()  # dropped while still queued: it never runs
                    raise
                except Exception:
                    pending.life.failed()  # a traced request that failed keeps its trace
                    raise
                return pending.reply(results)
            if len(parts) == 6 and parts[4:] == ["trace", "setting"]:
                return await self._trace_setting(method, parts[3], read_body)
            return self._models(method, parts, path)
        route = "/".join(parts[2:])
        if route == "" and method == "GET":
            return 200, self._server_metadata, JSON
        if route == "health/live" and method == "GET":
            return _health("live", None if self.data.live() else "server is not live")
        if route == "health/ready" and method == "GET":
            return self._server_ready()
        if route == "trace/setting":
            return await self._trace_setting(method, None, read_body)
        if route == "openapi.json" and method == "GET":
            return 200, self._openapi, JSON
        if len(parts) >= 4 and parts[2] in ("systemsharedmemory", "cudasharedmemory"):
            return self._shared_memory(method, parts, path, await read_body())
        if route == "repository/index" and method == "POST":
            return self._repository_index(await read_body())
        if (
            len(parts) == 6
            and parts[2:4] == ["repository", "models"]
            and parts[5] in ("load", "unload")
            and method == "POST"
        ):
            return await self._load_or_unload(parts[4], parts[5], await read_body())
        if route == "logging" and method in ("GET", "POST"):
            return self._logging(method, await read_body())
        raise NotFoundRoute(f"no route {method} {path}")

    # -- generate extension ---------------------------------------------------------------

    async def _generate(self, parts: list[str], path: str, body: bytes) -> Reply | ChunkedReply:
        model, version = _model_and_version(parts, path)
        life = InferLife(self.data, "http", model, self._clock())
        try:
            responses = life.generate(version, _json_object(body, "generate request"))
        except Exception:
            life.stream_ended(None, None, ok=False)
            raise
        if parts[-1] == "generate_stream":
            return ChunkedReply(200, list(EVENT_STREAM), _events(responses), responses.close)
        try:
            answers = [answer async for answer in responses]
        finally:
            responses.close()
        return 200, dumps(only_response(answers, model)), JSON

    # -- trace extension -----------------------------------------------------------------

    async def _trace_setting(self, method: str, model: str | None, read_body: ReadBody) -> Reply:
        """``GET/POST /v2[/models/M]/trace/setting``: every setting as a string (trace_level
        a list); a POST names the settings to change, null clears one."""
        if method == "GET":
            return 200, dumps(self.data.trace_settings(model)), JSON
        if method != "POST":
            raise NotFoundRoute(f"no route {method} trace/setting")
        changes = _json_object(await read_body(), "trace setting request")
        return 200, dumps(self.data.update_trace_settings(model, changes)), JSON

    # -- health and metadata --------------------------------------------------------------

    def _server_ready(self) -> Reply:
        reason = self.data.not_ready_reason()
        return _health("ready", None if reason is None else f"server is not ready: {reason}")

    def _models(self, method: str, parts: list[str], path: str) -> Reply:
        if method != "GET":
            raise NotFoundRoute(f"no route {method} {path}")
        if len(parts) == 4 and parts[3] == "stats":
            return 200, dumps(self.data.statistics(None, None)), JSON
        action = ""
        if len(parts) in (5, 7):
            action = parts[-1]
            parts = parts[:-1]
        model, version = _model_and_version([*parts, "x"], path)
        if action == "":
            return 200, dumps(self.data.model_metadata(model, version)), JSON
        if action == "ready":
            return _health("ready", self.data.model_not_ready_reason(model, version))
        if action == "config":
            return 200, dumps(self.data.model_config(model, version)), JSON
        if action == "stats":
            return 200, dumps(self.data.statistics(model, version)), JSON
        raise NotFoundRoute(f"no route GET {path}")

    # -- repository -----------------------------------------------------------------------

    def _repository_index(self, body: bytes) -> Reply:
        request = _json_object(body, "repository index request")
        ready_only = request.get("ready", False)
        if not isinstance(ready_only, bool):
            raise InvalidInput("repository index 'ready' must be true or false")
        return 200, dumps(self.data.repository_index(ready_only)), JSON

    async def _load_or_unload(self, model: str, action: str, body: bytes) -> Reply:
        request = _json_object(body, f"{action} request")
        parameters = request.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise InvalidInput(f"{action} request 'parameters' must be an object")
        if action == "load":
            await self.data.load(model, parameters)
        else:
            await self.data.unload(model)
        return EMPTY_OK

    # -- logging extension ----------------------------------------------------------------

    def _logging(self, method: str, body: bytes) -> Reply:
        """``GET /v2/logging``: the settings; ``POST``: change some, answer all of them."""
        if method == "GET":
            return 200, dumps(self.data.log_settings()), JSON
        changes = _json_object(body, "log settings request")
        return 200, dumps(self.data.update_log_settings(changes)), JSON

    # -- shared memory --------------------------------------------------------------------

    def _shared_memory(self, method: str, parts: list[str], path: str, body: bytes) -> Reply:
        """``/v2/{system,cuda}sharedmemory/[region/NAME/]{status,register,unregister}``."""
        action = parts[-1]
        if len(parts) == 4:
            name = None
        elif len(parts) >= 6 and parts[3] == "region":
            # A name with a '/' in it (sent as %2F) is refused by the registry, by name.
            name = "/".join(parts[4:-1])
        else:
            raise NotFoundRoute(f"no route {method} {path}")
        expected = {"status": "GET", "register": "POST", "unregister": "POST"}.get(action)
        if expected != method or (action == "register" and name is None):
            raise NotFoundRoute(f"no route {method} {path}")
        if parts[2] == "cudasharedmemory":
            return self._cuda_shared_memory(action, name)
        if action == "status":
            return 200, dumps(self.data.system_shared_memory_status(name)), JSON
        if action == "unregister":
            self.data.unregister_system_shared_memory(name)
            return EMPTY_OK
        assert name is not None
        request = _json_object(body, "register request")
        key = request.get("key")
        if not isinstance(key, str) or not key:
            raise InvalidInput(
                f"register {name!r}: 'key' must name the shared memory object, e.g. '/{name}'"
            )
        offset = _size(request, "offset", 0, name)
        byte_size = _size(request, "byte_size", None, name)
        self.data.register_system_shared_memory(name, key, offset, byte_size)
        return EMPTY_OK

    def _cuda_shared_memory(self, action: str, name: str | None) -> Reply:
        if action == "status":
            return 200, dumps(self.data.cuda_shared_memory_status(name)), JSON
        if action == "unregister":
            self.data.unregister_cuda_shared_memory(name)
            return EMPTY_OK
        assert name is not None  # the router sends register only with a region name
        self.data.register_cuda_shared_memory(name)  # always refused: no GPU

    # -- inference ------------------------------------------------------------------------

    def begin_infer(
        self,
        path: str,
        body: binary.BytesLike,
        header_length: bytes | None,
        traceparent: bytes | None = None,
        recv_start: int = 0,
    ) -> PendingInfer:
        """Decode and submit an infer request (``path`` ends in /infer); does not wait.

        Raises for a bad request; the returned future completes on an engine thread.
        ``traceparent``: the W3C trace-context header, continued by a traced request;
        ``recv_start``: when the request's first byte was read (HTTP_RECV_START), if known.
        """
        model, version = _model_and_version(path.split("/"), path)
        life = InferLife(
            self.data, "http", model, self._clock(), _header_text(traceparent), recv_start
        )
        try:
            json_length = binary.parse_header_length(header_length, len(body))
            decoded = infer.decode_request(body, json_length, model, version)
            life.submit(decoded)
        except Exception:
            life.failed()
            raise
        return PendingInfer(life, decoded, self._clock)


class PendingInfer:
    """A submitted infer request: its life (future, trace, latency), and how to answer once
    it completes."""

    __slots__ = ("_clock", "life", "request")

    def __init__(
        self, life: InferLife, request: infer.DecodedInfer, clock: Callable[[], float]
    ) -> None:
        self.life = life
        self.request = request
        self._clock = clock

    @property
    def future(self) -> InferFuture:
        future = self.life.future
        assert future is not None  # submitted before this was made
        return future

    def reply(self, results: Outputs) -> Reply:
        """The whole answer, for a caller that hands it over as it is returned (a traced
        request's trace ends here)."""
        header, buffers, headers = self._encode(results)
        reply = 200, binary.join(header, buffers)[0] if buffers else header, headers
        self.life.sending()
        self.life.sent()
        return reply

    def reply_parts(self, results: Outputs) -> tuple[int, list[binary.Chunk], Headers]:
        """:meth:`reply` with the body left as its parts (JSON header, then each tensor);
        the caller hands it over and says so to ``life``."""
        header, buffers, headers = self._encode(results)
        return 200, [header, *buffers], headers

    def _encode(self, results: Outputs) -> tuple[bytes, list[binary.Chunk], Headers]:
        life = self.life
        served = self.future.model_version or ""
        header, buffers = infer.encode_response_parts(life.model, served, self.request, results)
        life.answered(self._clock())
        if not buffers:
            return header, buffers, JSON
        return header, buffers, [BINARY_TYPE, (HEADER_LENGTH, b"%d" % len(header))]


def _header_text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


def _health(field: str, not_reason: str | None) -> Reply:
    """A health answer: 200 ``{field: true}``, or 400 (not 503, as Triton answers) with
    ``{field: false, "error": why}``. Triton sends no body; KServe's clients read
    ``{"live": ...}`` / ``{"ready": ...}``, and Triton's read only the status."""
    if not_reason is None:
        return 200, dumps({field: True}), JSON
    return 400, dumps({field: False, "error": not_reason}), JSON


def _model_and_version(parts: list[str], path: str) -> tuple[str, str | None]:
    """``['', 'v2', 'models', m, ('versions', v,)? action]`` -> (m, v or None)."""
    if len(parts) == 5 and parts[3]:
        return parts[3], None
    if len(parts) == 7 and parts[3] and parts[4] == "versions" and parts[5]:
        return parts[3], parts[5]
    raise NotFoundRoute(f"no route {path!r}")


def _size(request: dict[str, Any], field: str, default: int | None, region: str) -> int:
    value = request.get(field, default)
    if type(value) is not int or value < 0:
        raise InvalidInput(f"register {region!r}: {field!r} must be an integer >= 0, got {value!r}")
    return value


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    if not body.strip():
        return {}
    value = loads(body, what)
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object")
    return value
