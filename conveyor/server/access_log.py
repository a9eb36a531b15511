"""The access log: one line per request, on both front ends, off by default.

A front end checks :attr:`AccessLog.enabled` once per request (when the request starts);
with it off nothing else is done: no clock read, no route worked out, no record made. With
it on, the line goes to the ``conveyor.access`` logger at INFO, with its fields both in the
message (for the text formats) and as the record's extras (the JSON format's keys):
``protocol``, ``method``, ``route``, ``model``, ``status``, ``latency_ms``, ``request_id``.

The HTTP route is the path's template (``/v2/models/{model}/infer``), so lines group by
endpoint and a client's path text appears only as the model name, printable-escaped.
"""

from __future__ import annotations

import logging

ACCESS_LOGGER = "conveyor.access"

_log = logging.getLogger(ACCESS_LOGGER)


class AccessLog:
    """The switch, and how a front end writes one request's line."""

    __slots__ = ("enabled",)

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled

    def http(
        self,
        method: str,
        path: str,
        status: int,
        seconds: float,
        request_id: str | None = None,
    ) -> None:
        route, model = route_of(path)
        _write("http", method, route, model, str(status), seconds, request_id)

    def grpc(
        self, method: str, model: str | None, code: str, seconds: float, request_id: str | None
    ) -> None:
        """``code``: the gRPC status code's name (OK, INVALID_ARGUMENT, ...)."""
        _write("grpc", method, f"/inference.GRPCInferenceService/{method}", model, code, seconds,
               request_id)  # fmt: skip


def _write(
    protocol: str,
    method: str,
    route: str,
    model: str | None,
    status: str,
    seconds: float,
    request_id: str | None,
) -> None:
    if not _log.isEnabledFor(logging.INFO):
        return
    latency_ms = round(seconds * 1000.0, 3)
    model = printable(model) if model else None
    request_id = printable(request_id) if request_id else None
    extra = {
        "protocol": protocol, "method": method, "route": route, "model": model,
        "status": status, "latency_ms": latency_ms, "request_id": request_id,
    }  # fmt: skip
    # makeRecord + handle, not _log.info: info() walks the stack to find its caller (the
    # record's file and line), which would be most of an access line's cost and say nothing.
    record = _log.makeRecord(
        ACCESS_LOGGER, logging.INFO, __file__, 0, _MESSAGE,
        (protocol, method, route, model or "-", status, latency_ms, request_id or "-"),
        None, extra=extra,
    )  # fmt: skip
    _log.handle(record)


_MESSAGE = "%s %s %s model=%s status=%s latency_ms=%.3f request_id=%s"


# Path segments that name something (a model, a version, a region), after the segment
# that introduces them: they become placeholders in the route.
_NAMED_AFTER = {"models": "{model}", "versions": "{version}", "region": "{region}"}
_FIXED = frozenset(
    ("stats", "ready", "config", "infer", "generate", "generate_stream", "trace", "setting",
     "load", "unload", "index", "status", "register", "unregister")
)  # fmt: skip


def route_of(path: str) -> tuple[str, str | None]:
    """(the path's route template, the model it names or None).

    ``/v2/models/tiny/versions/1/infer`` -> (``/v2/models/{model}/versions/{version}/infer``,
    ``tiny``). A path that is not a V2 route is its own route, printable-escaped.
    """
    parts = path.split("/")
    if len(parts) < 2 or parts[1] != "v2":
        return printable(path), None
    model = None
    route = parts[:3]
    i = 3
    while i < len(parts):
        segment = parts[i]
        placeholder = _NAMED_AFTER.get(parts[i - 1])
        if placeholder is not None and segment not in _FIXED:
            if placeholder == "{model}":
                model = segment
            if placeholder == "{region}":
                # A region name may hold '/' (refused later, by name); the rest is its action.
                route += [placeholder, parts[-1]] if i < len(parts) - 1 else [placeholder]
                break
            route.append(placeholder)
        else:
            route.append(segment)
        i += 1
    return printable("/".join(route)), model


def printable(text: str) -> str:
    """``text`` with anything that could break a log line (newlines, controls) escaped."""
    if text.isprintable():
        return text
    return text.encode("unicode_escape").decode("ascii")
