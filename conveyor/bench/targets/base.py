"""The target interface: what to send to (``TargetSpec``) and the two sides of a target.

The implementations import this module; ``pick`` maps a URL to one of them, so nothing
here imports an implementation.
"""

from __future__ import annotations

import abc
import dataclasses
from urllib.parse import urlsplit

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
