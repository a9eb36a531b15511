"""What every front end reads about the server: the engine (once loaded) and readiness.

The ports open before the models load, so front ends start with no engine; the server sets
it when loading finishes and sets ``draining`` on SIGTERM. HTTP and gRPC answer health and
errors from the same state, so they always agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.errors import Unavailable

if TYPE_CHECKING:
    from conveyor.engine import Engine


class ServerState:
    def __init__(self, engine: Engine | None = None) -> None:
        self.engine: Engine | None = engine
        self.draining = False

    def require_engine(self) -> Engine:
        """The engine, or Unavailable while the models are still loading."""
        engine = self.engine
        if engine is None:
            raise Unavailable("the server is starting: models are still loading")
        return engine

    def not_ready_reason(self) -> str | None:
        """None when the server is ready (V2 health/ready); otherwise why not."""
        engine = self.engine
        if engine is None:
            return "models are still loading"
        if self.draining:
            return "the server is shutting down"
        if not engine.ready:
            return "a model is still loading"
        return None
