"""Watching a deployed application come up: progress as it goes, a bounded wait, and why
it failed when it does.

``serve.run`` waits, silently and for as long as it takes, for every replica to run; a
replica that no node has room for keeps it waiting forever. Here the application is
started without waiting, and Serve's status is read every second: each deployment's
state is printed when it changes, and the wait ends with the reason as soon as the
application fails, a replica cannot be scheduled, or the time is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import ray
from ray import serve

from conveyor.ray.resources import Ask, Cluster

POLL_S = 1.0
# Ray Serve's status message for a replica no node has room for, which it sets after 30 s
# of waiting. Trusted only once this command has waited that long itself: until then the
# message may be about the replicas of an earlier deploy, which this one replaces.
UNSCHEDULED = "to be scheduled"
UNSCHEDULED_AFTER_S = 35.0


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
) -> str | None:
    """Wait for ``app_name`` to be RUNNING; None when it is, else why it is not."""
    asked = {ask.deployment: ask for ask in asks}
    shown: dict[str, str] = {}
    started = time.monotonic()
    deadline = started + timeout
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
            trust = not wait_for_nodes and time.monotonic() - started >= UNSCHEDULED_AFTER_S
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
