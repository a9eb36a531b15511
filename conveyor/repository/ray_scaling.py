"""A model's Ray Serve settings: how many replicas, and when to add or remove one.

config.toml holds them in a ``[ray]`` table; config.pbtxt in ``parameters`` keys named
``ray.<key>`` (string values, as Triton writes every parameter). Both are checked here,
once, into :class:`RayScaling`; ``conveyor serve`` reads and ignores them, so one
repository serves both ways. Nothing here imports Ray: a repository is checked the same
with or without it installed.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.errors import RepositoryError

PBTXT_PREFIX = "ray."


@dataclasses.dataclass(frozen=True)
class RayScaling:
    """Ray Serve's autoscaling on ongoing requests per replica, for one model's deployment.

    With ``min_replicas == max_replicas`` the deployment has that many replicas and does
    not autoscale.
    """

    min_replicas: int = 1
    max_replicas: int = 1
    # Ray Serve adds replicas while the average replica holds more requests than this.
    target_ongoing_requests: float = 2.0
    # Requests one replica holds at once (running or in its engine's queue); past it, the
    # router waits for a free replica. Above the target, so a replica can batch.
    max_ongoing_requests: int = 16
    # Ray Serve's defaults: the window ongoing requests are averaged over, and how long
    # the average must stay past the target before a replica is added or removed.
    look_back_period_s: float = 30.0
    upscale_delay_s: float = 30.0
    downscale_delay_s: float = 600.0
    # CPUs Ray reserves for each replica: a quarter, so a small repository deploys on a
    # 2-CPU machine (see conveyor/ray/app.py); set it to what the instances use.
    num_cpus: float = 0.25

    @property
    def autoscales(self) -> bool:
        return self.max_replicas > self.min_replicas


_INTEGERS = {"min_replicas": 1, "max_replicas": 1, "max_ongoing_requests": 1}
_POSITIVE = {"target_ongoing_requests", "num_cpus", "look_back_period_s"}
_NON_NEGATIVE = {"upscale_delay_s", "downscale_delay_s"}
KEYS = sorted({*_INTEGERS, *_POSITIVE, *_NON_NEGATIVE})


def parse_ray_scaling(
    raw: Any, fail: Callable[[str], RepositoryError], where: Callable[[str], str]
) -> RayScaling:
    """``raw``: the ``[ray]`` table; ``where(key)`` names a key in the user's file
    (``[ray] min_replicas`` or ``parameters['ray.min_replicas']``)."""
    if not isinstance(raw, Mapping):
        raise fail("[ray] must be a table")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise fail(f"unknown key {where(unknown[0])}; known keys are {', '.join(KEYS)}")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _INTEGERS:
            minimum = _INTEGERS[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise fail(f"{where(key)} must be an integer >= {minimum}, got {value!r}")
        else:
            number = isinstance(value, int | float) and not isinstance(value, bool)
            low_ok = number and (value > 0 if key in _POSITIVE else value >= 0)
            if not low_ok or value == float("inf"):
                kind = "a positive number" if key in _POSITIVE else "a number >= 0"
                raise fail(f"{where(key)} must be {kind}, got {value!r}")
            value = float(value)
        values[key] = value
    scaling = RayScaling(**values)
    if "max_replicas" not in values and scaling.min_replicas > scaling.max_replicas:
        scaling = dataclasses.replace(scaling, max_replicas=scaling.min_replicas)
    if scaling.max_replicas < scaling.min_replicas:
        raise fail(
            f"{where('max_replicas')} ({scaling.max_replicas}) must be >= "
            f"{where('min_replicas')} ({scaling.min_replicas})"
        )
    return scaling


def pbtxt_ray_table(parameters: Mapping[str, str]) -> dict[str, Any]:
    """config.pbtxt's ``ray.*`` parameters as a ``[ray]`` table: numbers read from their
    strings; anything else is left a string, for :func:`parse_ray_scaling` to refuse."""
    table: dict[str, Any] = {}
    for key, text in parameters.items():
        if not key.startswith(PBTXT_PREFIX):
            continue
        value: Any = text
        for number in (int, float):
            with contextlib.suppress(ValueError):
                value = number(text)
                break
        table[key[len(PBTXT_PREFIX) :]] = value
    return table


def toml_key(key: str) -> str:
    return f"[ray] {key}"


def pbtxt_key(key: str) -> str:
    return f"parameters[{PBTXT_PREFIX + key!r}]"
