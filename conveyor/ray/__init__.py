"""The model repository on a Ray cluster, as Ray Serve deployments (``pip install
'.[ray]'`` from a checkout of Conveyor).

Each model is one deployment whose replicas each run a Conveyor :class:`~conveyor.Engine`
with that model loaded; Ray Serve adds and removes replicas on ongoing requests per
replica (the model's ``[ray]`` settings). The ingress deployment serves the same V2 HTTP
as ``conveyor serve``: Conveyor's ASGI app over a data plane whose engine forwards each
inference to the model's deployment through a deployment handle. So the cluster's HTTP
port answers tritonclient, perf_analyzer and curl unchanged.

    from ray import serve
    from conveyor.ray import build_app

    serve.run(build_app("models/"), name="conveyor", route_prefix="/")

Importing this package does not import Ray; its functions say what to install when Ray
Serve is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from conveyor.ray.requirement import require_ray_serve

if TYPE_CHECKING:
    from pathlib import Path

    from ray.serve import Application

__all__ = ["APP_NAME", "build_app", "require_ray_serve"]

APP_NAME = "conveyor"  # the Ray Serve application ``conveyor ray deploy`` runs


def build_app(repository: str | Path, **options: Any) -> Application:
    """The repository as a Ray Serve application (``serve.run`` it, or compose it).

    ``options``: see :func:`conveyor.ray.app.build_app` (ingress replicas and CPUs,
    the HTTP body limit).
    """
    require_ray_serve()
    from conveyor.ray.app import build_app as build

    return build(repository, **options)
