"""The target interface: a URL picks the implementation, by name (``inprocess``, http, grpc)."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from urllib.parse import urlsplit

import numpy as np

from conveyor.bench.inputs import ModelSpec
from conveyor.bench.server_stats import StatsTotals

SCHEMES = ("inprocess", "http", "grpc")
ENCODINGS = ("binary", "json")


@dataclasses.dataclass(frozen=True)
class TargetSpec:
    """Where and what to send to; picklable, so worker processes rebuild their clients from it."""

    url: str
    model: str
    version: str = ""
    encoding: str = "binary"  # HTTP only: the binary tensor extension or plain JSON
    streaming: bool = False  # gRPC only: every request on one ModelStreamInfer stream
    repository: str | None = None  # inprocess only: None = the built-in examples
    timeout_s: float = 30.0  # control-plane calls (metadata, statistics)

    @property
    def scheme(self) -> str:
        if self.url == "inprocess":
            return "inprocess"
        scheme = urlsplit(self.url).scheme
        if scheme not in ("http", "grpc"):
            raise ValueError(f"target must be inprocess, http://HOST:PORT or grpc://HOST:PORT; "
                             f"got {self.url!r}")
        return scheme

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        default = 8000 if parts.scheme == "http" else 8001
        return parts.hostname or "127.0.0.1", parts.port or default

    @property
    def label(self) -> str:
        if self.scheme == "http":
            return f"http-{self.encoding}"
        if self.scheme == "grpc" and self.streaming:
            return "grpc-stream"
        return self.scheme


class Control(abc.ABC):
    """Blocking calls the runner makes between measurements."""

    @abc.abstractmethod
    def describe(self) -> ModelSpec: ...

    @abc.abstractmethod
    def statistics(self) -> StatsTotals | None:
        """The model's cumulative statistics, or None when the server has no statistics."""

    def close(self) -> None:  # noqa: B027 - optional
        pass


class Client(abc.ABC):
    """Sends the one prepared request; lives on one event loop in one worker."""

    @abc.abstractmethod
    async def infer(self) -> None:
        """One request; returns when the whole answer arrived, raises if it failed."""

    async def close(self) -> None:  # noqa: B027 - optional
        pass


class RequestFailed(Exception):
    """A request the server answered with an error (status and the server's message)."""


def make_control(spec: TargetSpec) -> Control:
    scheme = spec.scheme
    if scheme == "inprocess":
        from conveyor.bench.targets.inprocess import InProcessControl

        return InProcessControl(spec)
    if scheme == "http":
        from conveyor.bench.targets.http import HttpControl

        return HttpControl(spec)
    from conveyor.bench.targets.grpc import GrpcControl

    return GrpcControl(spec)


def make_client(
    spec: TargetSpec,
    model: ModelSpec,
    inputs: Mapping[str, np.ndarray],
    control: Control | None = None,
) -> Client:
    """A client for one worker; ``control`` is needed for ``inprocess`` (it owns the engine)."""
    declared = {t.name: t.datatype for t in model.inputs}
    scheme = spec.scheme
    if scheme == "inprocess":
        from conveyor.bench.targets.inprocess import InProcessClient, InProcessControl

        if not isinstance(control, InProcessControl):
            raise ValueError("the inprocess target runs in the process that loaded the engine")
        return InProcessClient(control.engine, spec, inputs)
    if scheme == "http":
        from conveyor.bench.targets.http import HttpClient

        return HttpClient(spec, inputs, declared)
    if spec.streaming:
        from conveyor.bench.targets.grpc_stream import GrpcStreamClient

        return GrpcStreamClient(spec, inputs, declared)
    from conveyor.bench.targets.grpc import GrpcClient

    return GrpcClient(spec, inputs, declared)
