"""The check of what the deployments ask for against the cluster's CPUs (no Ray needed)."""

from __future__ import annotations

from conveyor.ray.resources import Ask, Cluster, shortfall

TWO_CPUS = Cluster([2.0], available=2.0)


def test_a_small_repository_fits_two_cpus_at_the_defaults() -> None:
    asks = [Ask("conveyor-ingress", 1, 0.25), *(Ask(f"model-{i}", 1, 0.25) for i in range(7))]
    assert shortfall(asks, TWO_CPUS) is None


def test_one_replica_larger_than_every_node_is_named() -> None:
    problem = shortfall([Ask("model-big", 1, 4.0)], Cluster([2.0, 2.0], available=4.0))
    assert problem == (
        "deployment model-big asks for 4 CPU per replica, and the largest node has 2 CPU "
        "(cluster: 4 CPU on 2 nodes, 4 CPU free now)"
    )


def test_replicas_past_the_cluster_total_are_listed() -> None:
    asks = [Ask("conveyor-ingress", 1, 0.5), Ask("model-a", 1, 1.0), Ask("model-b", 1, 1.0)]
    problem = shortfall(asks, Cluster([2.0], available=0.5))
    assert problem == (
        "the deployments ask for 2.5 CPU in all (conveyor-ingress 1 x 0.5 CPU; model-a 1 x "
        "1 CPU; model-b 1 x 1 CPU), and the cluster has 2 CPU on 1 node, 0.5 CPU free now"
    )


def test_counted_against_every_cpu_not_the_free_ones() -> None:
    """Deploying again replaces replicas that hold CPUs now."""
    assert shortfall([Ask("model-a", 2, 1.0)], Cluster([2.0], available=0.0)) is None
