"""A rail-optimised GPU cluster: how many switches, cables and optics.

A rail-optimised cluster wires NIC ``i`` of every node (the NIC of GPU ``i``) to the
leaves of rail ``i``, so the GPUs that talk most, the same local rank of different
nodes in a data- or pipeline-parallel group, are one switch apart; traffic between
rails crosses a spine, or NVLink inside the node. The fabric is non-blocking: a
leaf-spine (:func:`~aiinfra.hardware.topology.leaf_spine` with ``d = u``) while the
spines have a port for every leaf, a fat-tree of pods otherwise
(:func:`~aiinfra.hardware.topology.fat_tree`). Notation: ``radix`` ports per switch,
``d = radix/2`` NIC ports per leaf, ``g`` GPUs and NICs per node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiinfra.hardware.topology import (
    _check_count,
    _check_positive,
    _check_radix,
    _parallel_links,
)


@dataclass(frozen=True)
class RailCluster:
    """A rail-optimised GPU cluster with a non-blocking fabric.

    Attributes:
        gpus: GPUs wanted.
        nodes: ``ceil(gpus / g)``.
        rails: ``g``: NIC ``i`` of every node is on rail ``i``.
        tiers: 2 (a leaf-spine) or 3 (pods of leaf-spines under a core).
        pods: pods of three tiers (1 for two).
        leaves_per_rail: leaf switches of each rail.
        leaves: leaf switches of all rails.
        spines: spine switches; in three tiers, the pods' aggregation switches.
        core: core switches (0 for two tiers).
        switches: all switches.
        host_links: NIC-leaf links, one per NIC.
        fabric_links: switch-switch links.
        links: all links (cables).
        optics: transceivers, two per link (every link optical).
        max_gpus: GPUs the network built can hold.
        bisection_gbps: between two halves of the nodes.
        bisection_per_gpu_gbps: ``bisection_gbps`` per GPU of one half.
    """

    gpus: int
    nodes: int
    rails: int
    tiers: int
    pods: int
    leaves_per_rail: int
    leaves: int
    spines: int
    core: int
    switches: int
    host_links: int
    fabric_links: int
    links: int
    optics: int
    max_gpus: int
    bisection_gbps: float
    bisection_per_gpu_gbps: float


def rail_cluster(
    gpus: int, radix: int = 64, nic_gbps: float = 400.0, gpus_per_node: int = 8
) -> RailCluster:
    """Size a rail-optimised cluster: two tiers while they fit, three otherwise.

    Each leaf gives ``d = radix/2`` ports to NICs of one rail and ``radix/2`` to the
    tier above (non-blocking). Two tiers: the leaves of all rails share the spines,
    each leaf linked alike to each spine. Three tiers: a pod holds whole nodes, its
    ``(radix/2) // g`` leaves per rail linked alike to the pod's aggregation switches,
    whose other half of ports go to the core (aggregation switch ``a`` of every pod to
    core group ``a``, as in a fat-tree). Leaves and pods are built whole, so the
    network holds ``max_gpus``.

    Args:
        gpus: GPUs wanted, >= 1.
        radix: ports per switch, even and >= 4.
        nic_gbps: speed of a NIC and of every link, Gb/s (400 for NDR/400GbE).
        gpus_per_node: ``g``, GPUs and NICs per node (8 on an HGX board).

    Returns:
        The counts of :class:`RailCluster`.

    Raises:
        TypeError: a count not an int.
        ValueError: ``gpus`` or ``gpus_per_node`` < 1, ``nic_gbps`` <= 0, ``radix``
            odd or < 4, a pod with no leaf per rail (``radix/2 < g``) when three
            tiers are needed, or more GPUs than three tiers of ``radix`` can hold.
    """
    _check_radix(radix)
    _check_count(gpus, "gpus")
    _check_count(gpus_per_node, "gpus_per_node")
    _check_positive(nic_gbps, "nic_gbps")
    g, d = gpus_per_node, radix // 2
    nodes = math.ceil(gpus / g)
    leaves_per_rail = math.ceil(nodes / d)
    leaves = g * leaves_per_rail
    if leaves <= radix:  # two tiers: each spine has a port for every leaf
        tiers, pods, core = 2, 1, 0
        spines = d // _parallel_links(leaves, radix, d)
        max_gpus = g * leaves_per_rail * d
        fabric_links = leaves * d
    else:
        tiers, leaves_per_rail_in_pod = 3, d // g
        if leaves_per_rail_in_pod == 0:
            raise ValueError(
                f"radix={radix} too small for three tiers: a pod needs radix/2 >= "
                f"gpus_per_node={g} to hold a leaf of every rail"
            )
        pod_leaves = g * leaves_per_rail_in_pod
        nodes_per_pod = leaves_per_rail_in_pod * d
        pods = math.ceil(nodes / nodes_per_pod)
        if pods > radix:
            most = radix * nodes_per_pod * g
            raise ValueError(f"gpus={gpus} > {most}, the most radix={radix} holds")
        leaves_per_rail = pods * leaves_per_rail_in_pod
        leaves = g * leaves_per_rail
        aggregation_per_pod = d // _parallel_links(pod_leaves, d, d)
        core_per_group = d // _parallel_links(pods, radix, d)
        spines = pods * aggregation_per_pod
        core = aggregation_per_pod * core_per_group
        max_gpus = pods * nodes_per_pod * g
        fabric_links = leaves * d + spines * d
    host_links = nodes * g
    bisection_gbps = host_links // 2 * nic_gbps  # non-blocking: half the NICs at rate
    return RailCluster(
        gpus=gpus,
        nodes=nodes,
        rails=g,
        tiers=tiers,
        pods=pods,
        leaves_per_rail=leaves_per_rail,
        leaves=leaves,
        spines=spines,
        core=core,
        switches=leaves + spines + core,
        host_links=host_links,
        fabric_links=fabric_links,
        links=host_links + fabric_links,
        optics=2 * (host_links + fabric_links),
        max_gpus=max_gpus,
        bisection_gbps=bisection_gbps,
        bisection_per_gpu_gbps=bisection_gbps / max(host_links // 2, 1),
    )
