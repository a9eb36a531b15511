"""What each deployment asks of the cluster, checked against what the cluster has.

Ray Serve places a replica only on a node with its CPUs free, and a replica that fits
nowhere waits without an error (Serve mentions it in a status message after 30 s). So
``conveyor ray deploy`` compares the replicas it is about to start with the cluster's
nodes first, and refuses at once, naming the deployment, when they cannot all be placed.
Nothing here imports Ray: the numbers come in, a verdict goes out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

SLACK = 1e-9  # CPUs are sums of fractions (0.25 + 0.25 + ...)


@dataclasses.dataclass(frozen=True)
class Ask:
    """One deployment's replicas at start, and the CPUs Ray reserves for each."""

    deployment: str
    replicas: int
    cpus: float

    @property
    def total(self) -> float:
        return self.replicas * self.cpus

    def describe(self) -> str:
        return f"{self.deployment} {self.replicas} x {_cpus(self.cpus)}"


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The cluster's CPUs: per alive node (total), and free now."""

    node_cpus: Sequence[float]
    available: float

    @property
    def total(self) -> float:
        return sum(self.node_cpus)

    def describe(self) -> str:
        nodes = len(self.node_cpus)
        return (
            f"{_cpus(self.total)} on {nodes} node{'s' if nodes != 1 else ''}, "
            f"{_cpus(self.available)} free now"
        )


def shortfall(asks: Sequence[Ask], cluster: Cluster) -> str | None:
    """Why the replicas cannot all be placed on the cluster's nodes, or None if they can.

    Counted against every node's CPUs, not the free ones: deploying again replaces
    replicas that hold CPUs now.
    """
    largest = max(cluster.node_cpus, default=0.0)
    for ask in asks:
        if ask.cpus > largest + SLACK:
            return (
                f"deployment {ask.deployment} asks for {_cpus(ask.cpus)} per replica, and "
                f"the largest node has {_cpus(largest)} (cluster: {cluster.describe()})"
            )
    needed = sum(ask.total for ask in asks)
    if needed > cluster.total + SLACK:
        listed = "; ".join(ask.describe() for ask in asks)
        return (
            f"the deployments ask for {_cpus(needed)} in all ({listed}), and the cluster has "
            f"{cluster.describe()}"
        )
    return None


def _cpus(value: float) -> str:
    return f"{value:g} CPU"
