"""The repository as one Ray Serve application: a deployment per model, and the ingress.

Each model's deployment takes its replicas and autoscaling from the model's config
(``[ray]`` in config.toml, ``ray.*`` parameters in config.pbtxt; see
``conveyor/repository/ray_scaling.py``). Reading the repository here checks every config
before anything is deployed, so a bad one fails ``conveyor ray deploy`` with the same
message ``conveyor serve`` gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray import serve

import conveyor
from conveyor.errors import RepositoryError
from conveyor.protocol.limits import DEFAULT_MAX_MESSAGE_BYTES
from conveyor.ray.ingress import V2Ingress
from conveyor.ray.replica import ModelReplica
from conveyor.ray.resources import Ask
from conveyor.repository.config import ModelConfig
from conveyor.repository.layout import Repository

INGRESS = "conveyor-ingress"
# One access-log line per request in every replica costs more than the request on a small
# model; Ray Serve's own warnings and errors still show.
QUIET = {"enable_access_log": False}
# The ingress only forwards requests (awaiting the models' answers), so a quarter CPU; with
# the models' default (``[ray] num_cpus``, also 0.25) the ingress and seven one-replica
# models fit on a 2-CPU node. Ray's CPUs are a reservation for placing replicas, not a
# limit on what a replica uses.
INGRESS_CPUS = 0.25


def deployment_name(model: str) -> str:
    return f"model-{model}"


def deployment_options(config: ModelConfig) -> dict[str, Any]:
    """Ray Serve's options for one model's deployment, from its ``[ray]`` settings."""
    scaling = config.ray
    if config.sequence_batching is not None and scaling.max_replicas > 1:
        raise RepositoryError(
            f"model {config.name!r}: a model with sequence_batching keeps each sequence's "
            f"state in one replica; set its ray max_replicas to 1 (got {scaling.max_replicas})"
        )
    options: dict[str, Any] = {
        "name": deployment_name(config.name),
        "logging_config": QUIET,
        "max_ongoing_requests": scaling.max_ongoing_requests,
        "ray_actor_options": {"num_cpus": scaling.num_cpus},
    }
    if scaling.autoscales:
        options["autoscaling_config"] = {
            "min_replicas": scaling.min_replicas,
            "max_replicas": scaling.max_replicas,
            "target_ongoing_requests": scaling.target_ongoing_requests,
            "look_back_period_s": scaling.look_back_period_s,
            "upscale_delay_s": scaling.upscale_delay_s,
            "downscale_delay_s": scaling.downscale_delay_s,
        }
    else:
        options["num_replicas"] = scaling.min_replicas
    return options


def _model_options(root: Path) -> dict[str, dict[str, Any]]:
    """Each model's deployment options, every config checked first."""
    source = Repository(root)
    options = {
        name: deployment_options(source.source(name).config) for name in source.model_names()
    }
    if not options:
        raise RepositoryError(f"model repository {str(root)!r} holds no models")
    return options


def asks(
    repository: str | Path, *, ingress_replicas: int = 1, ingress_cpus: float = INGRESS_CPUS
) -> list[Ask]:
    """What each deployment of :func:`build_app` asks of the cluster when it starts."""
    found = [
        Ask(
            options["name"],
            options.get("num_replicas") or options["autoscaling_config"]["min_replicas"],
            options["ray_actor_options"]["num_cpus"],
        )
        for options in _model_options(Path(repository).resolve()).values()
    ]
    return [Ask(INGRESS, ingress_replicas, ingress_cpus), *found]


def build_app(
    repository: str | Path,
    *,
    ingress_replicas: int = 1,
    ingress_cpus: float = INGRESS_CPUS,
    max_body_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> serve.Application:
    """Every model of ``repository`` as a deployment, behind the V2 HTTP ingress.

    The repository's path must be readable at the same place on every node that runs a
    replica (a shared filesystem, or the same image on each node).
    """
    root = Path(repository).resolve()
    handles = {
        name: serve.deployment(**options)(ModelReplica).bind(str(root), name)
        for name, options in _model_options(root).items()
    }
    ingress = serve.deployment(
        name=INGRESS,
        num_replicas=ingress_replicas,
        ray_actor_options={"num_cpus": ingress_cpus},
        # Requests only wait on the models here; let many in at once.
        max_ongoing_requests=1000,
        logging_config=QUIET,
    )(V2Ingress)
    return ingress.bind(handles, conveyor.__version__, max_body_bytes)
