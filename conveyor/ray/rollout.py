"""Watching a deployed application come up: progress as it goes, a bounded wait, and why
it failed when it does.

``serve.run`` waits, silently and for as long as it takes, for every replica to run; a
replica that no node has room for keeps it waiting forever. Here the application is
started without waiting, and Serve's status is read every second: each deployment's
state is printed when it changes, and the wait ends with the reason as soon as the
application fails, a replica cannot be scheduled, or the time is up.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray
from ray import serve

from conveyor.errors import ConveyorError
from conveyor.ray.resources import Ask, Cluster

POLL_S = 1.0
# Ray Serve's status message for a replica no node has room for. Serve's controller sets it
# once a replica has waited RAY_SERVE_SLOW_STARTUP_WARNING_S (default 30 s), at most every
# RAY_SERVE_SLOW_STARTUP_WARNING_PERIOD_S (default 30 s). Trusted only once this command
# has waited that long itself, plus a margin: until then the message may be about the
# replicas of an earlier deploy, which this one replaces.
UNSCHEDULED = "to be scheduled"
UNSCHEDULED_MARGIN_S = 5.0
# Serve's own variables, in the order Serve reads them (the RAY_ name first), and default.
SLOW_STARTUP_VARIABLES = {
    "RAY_SERVE_SLOW_STARTUP_WARNING_S": "SERVE_SLOW_STARTUP_WARNING_S",
    "RAY_SERVE_SLOW_STARTUP_WARNING_PERIOD_S": "SERVE_SLOW_STARTUP_WARNING_PERIOD_S",
}
SLOW_STARTUP_DEFAULT_S = 30


def unscheduled_after_s(environ: Mapping[str, str] = os.environ) -> float:
    """How long to wait before trusting Serve's "to be scheduled" message: the later of
    Serve's warning delay and period, as the cluster reads them from the same variables
    (set them for ``ray start`` and for this command alike), plus a margin."""
    seconds = []
    for name, older in SLOW_STARTUP_VARIABLES.items():
        text = environ.get(name, environ.get(older, str(SLOW_STARTUP_DEFAULT_S)))
        try:
            seconds.append(int(text))
        except ValueError:
            raise ConveyorError(
                f"{name} must be a whole number of seconds (as Ray Serve reads it), got {text!r}"
            ) from None
    return max(seconds) + UNSCHEDULED_MARGIN_S


def word(state: Any) -> str:
    """A Ray Serve status enum as its value ("RUNNING"), not its repr."""
    return str(getattr(state, "value", state))


def replicas_text(replica_states: dict[Any, int]) -> str:
    """``RUNNING 1, STARTING 1``, or ``no replicas``."""
    parts = sorted((word(state), count) for state, count in replica_states.items())
    return ", ".join(f"{state} {count}" for state, count in parts) or "no replicas"


def cluster_cpus() -> Cluster:
    """The connected cluster's CPUs: each alive node's, and how many are free now."""
    nodes = [n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")]
    return Cluster(nodes, float(ray.available_resources().get("CPU", 0.0)))


def wait_running(
    app_name: str,
    asks: Sequence[Ask],
    timeout: float,
    say: Callable[[str], None],
    *,
    wait_for_nodes: bool = False,
    unscheduled_after: float | None = None,
) -> str | None:
    """Wait for ``app_name`` to be RUNNING; None when it is, else why it is not.
    ``unscheduled_after`` defaults to :func:`unscheduled_after_s`."""
    asked = {ask.deployment: ask for ask in asks}
    shown: dict[str, str] = {}
    started = time.monotonic()
    deadline = started + timeout
    if unscheduled_after is None:
        unscheduled_after = unscheduled_after_s()
    while True:
        app = serve.status().applications.get(app_name)
        if app is not None:
            for name, deployment in sorted(app.deployments.items()):
                line = f"{word(deployment.status)} ({replicas_text(deployment.replica_states)})"
                if shown.get(name) != line:
                    shown[name] = line
                    say(f"  {name}: {line}")
            state = word(app.status)
            if state == "RUNNING":
                return None
            if state in ("DEPLOY_FAILED", "UNHEALTHY"):
                return f"application {app_name!r} is {state}: " + _troubles(app)
            trust = not wait_for_nodes and time.monotonic() - started >= unscheduled_after
            for name, deployment in sorted(app.deployments.items()):
                if trust and UNSCHEDULED in (deployment.message or ""):
                    ask = asked.get(name)
                    wants = f"{ask.cpus:g} CPU per replica" if ask else "its resources"
                    return (
                        f"deployment {name} asks for {wants} and Ray cannot place a "
                        f"replica: the cluster has {cluster_cpus().describe()} (other "
                        "applications or actors hold the rest). Lower its [ray] num_cpus, "
                        "free CPUs, or add nodes"
                    )
        if time.monotonic() >= deadline:
            details = _troubles(app) if app is not None else "the application never appeared"
            return f"application {app_name!r} not running after {timeout:g} s: {details}"
        time.sleep(POLL_S)


def _troubles(app: Any) -> str:
    """Each deployment that is not HEALTHY, with Serve's message for it."""
    found = [
        f"{name} is {word(d.status)}" + (f" ({d.message})" if d.message else "")
        for name, d in sorted(app.deployments.items())
        if word(d.status) != "HEALTHY"
    ]
    return "; ".join(found) or (app.message or "no deployment reports a problem")
