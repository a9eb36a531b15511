"""The ingress deployment: Conveyor's V2 HTTP routes as Ray Serve's ASGI ingress.

Its data plane's engine is a :class:`~conveyor.ray.facade.RemoteEngine`; building the app
(``__serve_build_asgi_app__``, awaited by Ray Serve when the replica starts) first asks each
model deployment what it serves, so metadata and config answers need no round trip.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray import serve
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from conveyor.ray.facade import RemoteEngine
from conveyor.ray.messages import ServedModel
from conveyor.server.dataplane import DataPlane
from conveyor.server.http.asgi import ASGIApp
from conveyor.server.http.routes import V2Routes

# What a request sees when the replica it went to died (killed, its node lost).
REPLICA_DEATH = (ActorDiedError, ActorUnavailableError, RayActorError)


@serve.ingress()
class V2Ingress:
    def __init__(self, handles: dict[str, Any], version: str, max_body_bytes: int) -> None:
        self.handles = handles
        self.version = version
        self.max_body_bytes = max_body_bytes

    async def __serve_build_asgi_app__(self) -> ASGIApp:
        names = sorted(self.handles)
        described = await asyncio.gather(*(self.handles[n].describe.remote() for n in names))
        served: dict[str, list[ServedModel]] = dict(zip(names, described, strict=True))
        engine = RemoteEngine(self.handles, served, REPLICA_DEATH)
        # RemoteEngine is a ServingEngine, as the in-process Engine is.
        plane = DataPlane(engine, version=self.version)
        return ASGIApp(V2Routes(plane), max_body_bytes=self.max_body_bytes)
