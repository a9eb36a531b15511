"""The HTTP/REST transport: V2 over aiohttp, with binary tensors in both directions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import aiohttp

from conveyor.client._base import DEFAULT_CALL_TIMEOUT_S, BaseClient
from conveyor.client.generate import generate_body, generate_outputs, sse_events
from conveyor.client.shared_memory import DEFAULT_THRESHOLD, OutputSlot
from conveyor.errors import (
    ConveyorError,
    ErrorKind,
    InvalidInput,
    ModelError,
    ModelNotFound,
    Unauthenticated,
    Unavailable,
    error_for_kind,
)
from conveyor.futures import Outputs
from conveyor.protocol import infer
from conveyor.protocol.binary import HEADER_LENGTH_HEADER
from conveyor.protocol.json_codec import dumps, loads
from conveyor.protocol.request import InferenceRequest, wire_parameters
from conveyor.protocol.shared_memory import InputInRegion

# The error kind our server names in its error body -> the error raised here.
_BY_KIND: dict[str, type[ConveyorError]] = {kind.value: error_for_kind(kind) for kind in ErrorKind}
_JSON = {"content-type": "application/json"}
# Other V2 servers send only a message: go by the status.
_BY_STATUS: dict[int, type[ConveyorError]] = {
    400: InvalidInput,
    401: Unauthenticated,
    404: ModelNotFound,
    503: Unavailable,
}


class HTTPClient(BaseClient):
    """``HTTPClient("http://127.0.0.1:8000")``; see :class:`BaseClient` for the API."""

    def __init__(
        self,
        url: str,
        *,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT_S,
        max_connections: int = 64,
        binary_data: bool = True,
        shared_memory: bool = True,
        shared_memory_threshold: int = DEFAULT_THRESHOLD,
    ) -> None:
        """``max_connections``: concurrent requests in flight (more wait for a connection).

        ``binary_data``: send and receive tensors with the binary extension (False: JSON).
        ``shared_memory``: see :class:`BaseClient`.
        """
        super().__init__(
            url,
            call_timeout=call_timeout,
            shared_memory=shared_memory,
            shared_memory_threshold=shared_memory_threshold,
        )
        self._max_connections = max_connections
        self._binary_data = binary_data
        self._session: aiohttp.ClientSession | None = None

    async def _open(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self._max_connections),
            timeout=aiohttp.ClientTimeout(total=self.call_timeout),
            # Tensors compress poorly: do not ask the server to spend CPU on it.
            skip_auto_headers=("Accept-Encoding",),
        )

    async def _close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _infer(
        self,
        request: InferenceRequest,
        *,
        in_regions: Mapping[str, InputInRegion] | None = None,
        out_regions: Mapping[str, OutputSlot] | None = None,
    ) -> Outputs:
        body, header_length = infer.encode_request(
            request.inputs,
            outputs=request.outputs,
            request_id=request.id,
            parameters=wire_parameters(request),
            binary_data=self._binary_data,
            in_regions=in_regions,
            out_regions={name: slot.location for name, slot in (out_regions or {}).items()},
        )
        headers = {} if header_length is None else {HEADER_LENGTH_HEADER: str(header_length)}
        status, data, response_headers = await self._request(
            "POST", _model_path(request.model, request.version) + "/infer", body, headers
        )
        if status != 200:
            raise _error(status, data)
        length = response_headers.get(HEADER_LENGTH_HEADER)
        slots = out_regions or {}
        header, results = infer.decode_response(
            data, int(length) if length is not None else None, slots
        )
        for name, (datatype, shape) in infer.outputs_in_regions(header, slots).items():
            results[name] = slots[name].read(datatype, shape)
        return results

    async def _register_region(self, name: str, key: str, byte_size: int) -> None:
        body = dumps({"key": key, "offset": 0, "byte_size": byte_size})
        path = f"/v2/systemsharedmemory/region/{quote(name, safe='')}/register"
        status, data, _ = await self._request("POST", path, body, _JSON)
        if status != 200:
            raise _error(status, data)

    async def _unregister_region(self, name: str) -> None:
        path = f"/v2/systemsharedmemory/region/{quote(name, safe='')}/unregister"
        status, data, _ = await self._request("POST", path)
        if status != 200:
            raise _error(status, data)

    async def _responses(self, request: InferenceRequest) -> AsyncIterator[Outputs]:
        """One request on the generate extension's ``generate_stream`` (Server-Sent Events);
        each event's fields become arrays of the model's output datatypes."""
        model, version, outputs = request.model, request.version, request.outputs
        config = await self._get("model_config", model, version)
        body = generate_body(request.inputs, wire_parameters(request))
        assert self._session is not None
        try:
            async with self._session.post(
                self.url + _model_path(model, version) + "/generate_stream",
                data=dumps(body),
                headers=_JSON,
                timeout=aiohttp.ClientTimeout(total=None, sock_read=self.call_timeout),
            ) as response:
                if response.status != 200:
                    raise _error(response.status, await response.read())
                async for event in sse_events(response.content):
                    if "error" in event:
                        raise ModelError(str(event["error"]))
                    yield generate_outputs(event, config, outputs)
        except (aiohttp.ClientError, OSError) as exc:
            raise Unavailable(f"cannot reach {self.url}: {type(exc).__name__}: {exc}") from exc

    async def _get(
        self, what: str, model: str | None = None, version: int | str | None = None
    ) -> Any:
        if what in ("live", "ready"):
            status, _, _ = await self._request("GET", f"/v2/health/{what}")
            return status == 200
        if what == "server_metadata":
            path = "/v2"
        elif what == "statistics":
            path = "/v2/models/stats" if model is None else _model_path(model, version) + "/stats"
        else:
            assert model is not None
            suffix = {"model_ready": "/ready", "model_metadata": "", "model_config": "/config"}
            path = _model_path(model, version) + suffix[what]
        status, data, _ = await self._request("GET", path)
        if what == "model_ready":
            return status == 200
        if status != 200:
            raise _error(status, data)
        return loads(data, "response body")

    async def _request(
        self, method: str, path: str, body: bytes | None = None, headers: Any = None
    ) -> tuple[int, bytes, Any]:
        assert self._session is not None
        try:
            async with self._session.request(
                method, self.url + path, data=body, headers=headers
            ) as response:
                return response.status, await response.read(), response.headers
        except (aiohttp.ClientError, OSError) as exc:
            raise Unavailable(f"cannot reach {self.url}: {type(exc).__name__}: {exc}") from exc


def _model_path(model: str, version: int | str | None) -> str:
    path = f"/v2/models/{quote(model, safe='')}"
    if version is not None and version != "":
        path += f"/versions/{quote(str(version), safe='')}"
    return path


def _error(status: int, data: bytes) -> ConveyorError:
    kind = None
    try:
        body = loads(data, "error body")
        message, kind = body["error"], body.get("kind")
    except (ConveyorError, KeyError, TypeError, AttributeError):
        message = data[:200].decode(errors="replace") or f"HTTP {status}"
    error_class = _BY_KIND.get(kind) if isinstance(kind, str) else None
    return (error_class or _BY_STATUS.get(status, ModelError))(str(message))
