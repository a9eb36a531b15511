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
from conveyor.options import option

SCHEMES = ("inprocess", "http", "grpc")
ENCODINGS = ("binary", "json")


@dataclasses.dataclass(frozen=True)
class TargetSpec:
    """Where and what to send to; picklable, so worker processes rebuild their clients from it."""

    url: str = dataclasses.field(
        metadata=option(
            "inprocess, http://HOST:PORT or grpc://HOST:PORT", default="http://127.0.0.1:8000"
        )
    )
    model: str = dataclasses.field(metadata=option("model name", positional=True))
    version: str = dataclasses.field(
        default="",
        metadata=option("model version (default: the server's choice)", flags=("--model-version",)),
    )
    encoding: str = dataclasses.field(
        default="binary",
        metadata=option("HTTP tensors: the binary extension or plain JSON", choices=ENCODINGS),
    )
    streaming: bool = dataclasses.field(
        default=False,
        metadata=option(
            "gRPC: send every request on one ModelStreamInfer stream per generator process"
        ),
    )
    repository: str | None = dataclasses.field(
        default=None,
        metadata=option("inprocess: model repository (default: the built-in examples)"),
    )
    timeout_s: float = 30.0  # control-plane calls (metadata, statistics)

    def __post_init__(self) -> None:
        scheme = self.scheme  # checks the URL
        if self.streaming and scheme != "grpc":
            raise ValueError("streaming (--streaming) is for grpc:// targets")
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {self.encoding!r}")

    @property
    def scheme(self) -> str:
        if self.url == "inprocess":
            return "inprocess"
        scheme = urlsplit(self.url).scheme
        if scheme not in ("http", "grpc"):
            raise ValueError(
                f"target must be inprocess, http://HOST:PORT or grpc://HOST:PORT; got {self.url!r}"
            )
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
