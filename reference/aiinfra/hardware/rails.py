"""A rail-optimised GPU cluster: how many switches, cables and optics.

A rail-optimised cluster wires NIC ``i`` of every node (the NIC of GPU ``i``) to the
leaves of rail ``i``, so the GPUs that talk most, the same local rank of different
nodes in a data- or pipeline-parallel group, are one switch apart; traffic between
rails crosses a spine, or NVLink inside the node. The fabric is non-blocking: a
leaf-spine (:func:`~aiinfra.hardware.topology.leaf_spine` with ``d = u``) while the
spines have a port for every leaf, a fat-tree of pods otherwise
(:func:`~aiinfra.hardware.topology.fat_tree`). Notation: ``radix`` ports per switch,
``d = radix/2`` NIC ports per leaf, ``g`` GPUs and NICs per node.

The node is also a *scale-up domain*: its GPUs talk over NVLink switches, an order of
magnitude faster than their NICs. :class:`ScaleUpDomain` holds the two bandwidths and
:func:`all_to_all_seconds` prices an all-to-all (expert parallelism's exchange) whose
group spans domains: an 8-GPU HGX board sends most of it through the NICs, a 72-GPU
NVL72 rack keeps a group of up to 72 on NVLink.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiinfra import checks
from aiinfra.hardware.topology import (
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
        bisection_gbps: between two halves of the nodes (the first and the last
            half in node order), by max-flow.
        bisection_per_gpu_gbps: ``bisection_gbps`` per GPU of one half.
        oversubscription: of the aggregation tier toward the core, ``d / up``; 1
            is non-blocking; pods are non-blocking inside either way.
        nodes_per_pod: whole nodes a pod holds (all nodes for two tiers).
        cross_pod_per_gpu_gbps: what each GPU of a pod gets toward other pods
            when all send across at once: ``B / oversubscription``.
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
    oversubscription: float = 1.0
    nodes_per_pod: int = 0
    cross_pod_per_gpu_gbps: float = 0.0


def _cross_pod_flow(nics: int, per_pod: int, uplink_nics: float) -> float:
    """Max-flow, in NIC rates, between the first and the last half of the NICs.

    ``nics`` NICs in pods of ``per_pod``, whose core uplinks carry ``uplink_nics``
    NIC rates per pod. A pod is non-blocking inside, so pairs in one pod use no
    uplink; what is left of each half crosses the core, at most ``uplink_nics``
    out of and into a pod.
    """
    half = nics // 2
    inside, out, into = 0.0, 0.0, 0.0
    for start in range(0, nics, per_pod):
        end = min(start + per_pod, nics)
        a = max(0, min(end, half) - start)  # the first half's NICs in this pod
        b = max(0, end - max(start, nics - half))  # the last half's
        both = min(a, b)
        inside += both
        out += min(uplink_nics, a - both)
        into += min(uplink_nics, b - both)
    return inside + min(out, into)


def rail_cluster(
    gpus: int,
    radix: int = 64,
    nic_gbps: float = 400.0,
    gpus_per_node: int = 8,
    oversubscription: int = 1,
) -> RailCluster:
    """Size a rail-optimised cluster: two tiers while they fit, three otherwise.

    Each leaf gives ``d = radix/2`` ports to NICs of one rail and ``radix/2`` to the
    tier above (non-blocking). Two tiers: the leaves of all rails share the spines,
    each leaf linked alike to each spine. Three tiers: a pod holds whole nodes, its
    ``(radix/2) // g`` leaves per rail linked alike to the pod's aggregation switches,
    whose other half of ports go to the core (aggregation switch ``a`` of every pod to
    core group ``a``, as in a fat-tree). Leaves and pods are built whole, so the
    network holds ``max_gpus``. With ``oversubscription`` ``r`` > 1, each
    aggregation switch keeps its ``radix/2`` ports down into its pod but wires only
    ``radix/(2r)`` up to the core, as large clusters do above their pods (Llama 3's
    24K-GPU RoCE cluster: full bisection inside pods of 3,072 GPUs, 1:7 above, Dubey
    et al. 2024, Sec. 3.3.1): fewer cores and optics, ``B / r`` per GPU between
    pods. Two tiers have no core, so ``r`` changes nothing there.

    Args:
        gpus: GPUs wanted, >= 1.
        radix: ports per switch, even and >= 4.
        nic_gbps: speed of a NIC and of every link, Gb/s (400 for NDR/400GbE).
        gpus_per_node: ``g``, GPUs and NICs per node (8 on an HGX board).
        oversubscription: ``r``, aggregation down-ports per core uplink, >= 1 and
            dividing ``radix/2``.

    Returns:
        The counts of :class:`RailCluster`.

    Raises:
        TypeError: a count not an int.
        ValueError: ``gpus`` or ``gpus_per_node`` < 1, ``nic_gbps`` <= 0, ``radix``
            odd or < 4, a pod with no leaf per rail (``radix/2 < g``) when three
            tiers are needed, more GPUs than three tiers of ``radix`` can hold, or
            ``oversubscription`` < 1 or not dividing ``radix/2``.
    """
    _check_radix(radix)
    checks.positive_int("gpus", gpus)
    checks.positive_int("gpus_per_node", gpus_per_node)
    checks.positive("nic_gbps", nic_gbps)
    checks.positive_int("oversubscription", oversubscription)
    if (radix // 2) % oversubscription:
        raise ValueError(
            f"oversubscription must divide radix/2={radix // 2}, got {oversubscription}"
        )
    # region two-tiers
    g, d = gpus_per_node, radix // 2
    nodes = math.ceil(gpus / g)
    leaves_per_rail = math.ceil(nodes / d)
    leaves = g * leaves_per_rail
    if leaves <= radix:  # two tiers: each spine has a port for every leaf
        tiers, pods, core = 2, 1, 0
        spines = d // _parallel_links(leaves, radix, d)
        max_gpus = g * leaves_per_rail * d
        fabric_links = leaves * d
        nodes_per_pod, up = nodes, d
    # endregion
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
        up = d // oversubscription  # core uplinks of an aggregation switch
        core_per_group = up // _parallel_links(pods, radix, up)
        spines = pods * aggregation_per_pod
        core = aggregation_per_pod * core_per_group
        max_gpus = pods * nodes_per_pod * g
        fabric_links = leaves * d + spines * up
    host_links = nodes * g
    ratio = d / up
    bisection_gbps = nic_gbps * _cross_pod_flow(
        host_links, nodes_per_pod * g, nodes_per_pod * g / ratio
    )
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
        oversubscription=ratio,
        nodes_per_pod=nodes_per_pod,
        cross_pod_per_gpu_gbps=nic_gbps / ratio,
    )


@dataclass(frozen=True)
class ScaleUpDomain:
    """GPUs joined by one NVLink switch fabric, each with its own scale-out NIC.

    Attributes:
        name: the system.
        gpus: ``D``, GPUs in one NVLink domain.
        nvlink_gbps: NVLink bandwidth of one GPU, each direction, Gb/s.
        nic_gbps: scale-out NIC bandwidth of one GPU, each direction, Gb/s.
    """

    name: str
    gpus: int
    nvlink_gbps: float
    nic_gbps: float


#: HGX H100 8-GPU: NVLink 4 at 900 GB/s per GPU, both directions together (450 GB/s
#: = 3,600 Gb/s each way); one 400 Gb/s ConnectX-7 NIC per GPU (NVIDIA datasheets).
HGX_H100 = ScaleUpDomain("HGX H100", 8, 3600.0, 400.0)
#: GB200 NVL72: 72 GPUs in one NVLink 5 domain at 1.8 TB/s per GPU both directions
#: (7,200 Gb/s each way); DGX GB200: four 400 Gb/s ConnectX-7 per tray of four GPUs.
GB200_NVL72 = ScaleUpDomain("GB200 NVL72", 72, 7200.0, 400.0)


def all_to_all_seconds(
    domain: ScaleUpDomain, group: int, bytes_per_gpu: float
) -> float:
    """Bandwidth time of an all-to-all over ``group`` GPUs packed into domains.

    GPU ``i`` is in domain ``i // D``. Each GPU sends ``bytes_per_gpu / group`` to
    every other GPU: over NVLink to the ``s - 1`` others of its domain's ``s``
    members, over its NIC to the ``group - s`` outside. Both links run at once and
    the non-blocking fabric adds no contention, so a GPU takes the longer of the two
    and the collective the slowest GPU (latency ignored).

    Args:
        domain: the scale-up domain the GPUs sit in.
        group: GPUs in the all-to-all, >= 1.
        bytes_per_gpu: each GPU's send buffer (its own shard included), bytes, > 0.

    Returns:
        Seconds.

    Raises:
        TypeError: ``group`` not an int.
        ValueError: ``group`` < 1 or ``bytes_per_gpu`` <= 0.
    """
    checks.positive_int("group", group)
    checks.positive("bytes_per_gpu", bytes_per_gpu)
    # region all-to-all
    chunk_bits = 8 * bytes_per_gpu / group  # to each peer
    full, rest = divmod(group, domain.gpus)
    sizes = [domain.gpus] * full + ([rest] if rest else [])  # members per domain
    seconds = [  # a GPU of a domain with s members: NVLink and NIC at once
        max(
            (s - 1) * chunk_bits / (domain.nvlink_gbps * 1e9),
            (group - s) * chunk_bits / (domain.nic_gbps * 1e9),
        )
        for s in sizes
    ]
    # endregion
    return max(seconds)  # the slowest GPU
