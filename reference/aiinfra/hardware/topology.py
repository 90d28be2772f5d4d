"""Cluster networks: the fat-tree and the leaf-spine.

A three-tier fat-tree of identical ``k``-port switches (Al-Fares, Loukissas & Vahdat
2008) has ``k`` pods of ``k/2`` edge and ``k/2`` aggregation switches and ``(k/2)^2``
core switches; it connects ``k^3/4`` hosts at full bisection bandwidth. A two-tier
leaf-spine gives each leaf ``d`` downlinks to hosts and ``u`` uplinks, one to each
spine; ``d/u`` is its oversubscription. :mod:`.rails` builds a GPU cluster from
these two. Notation: ``k`` (``radix``) ports per switch, ``d``/``u`` down/uplinks of a
leaf, ``B`` link speed in Gb/s. Bisection bandwidths are one direction, Gb/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra import checks

#: A switch or host of a wired network: its tier, then its indices, e.g.
#: ``("edge", pod, e)``, ``("host", pod, e, h)``, ``("core", a, c)``.
Node = tuple[str | int, ...]


def _check_radix(radix: int, name: str = "radix") -> None:
    checks.integer(name, radix, low=4)
    if radix % 2:
        raise ValueError(f"{name} must be an even number of ports, got {radix}")


def _parallel_links(lower: int, down_ports: int, uplinks: int) -> int:
    """Links between each lower and each upper switch of a complete bipartite tier.

    Each of ``lower`` switches gives the same ``p`` of its ``uplinks`` to each upper
    switch (which has ``down_ports``), so the tier stays non-blocking; the largest
    ``p`` needs the fewest upper switches, ``uplinks / p``.
    """
    return max(
        p for p in range(1, uplinks + 1) if uplinks % p == 0 and lower * p <= down_ports
    )


@dataclass(frozen=True)
class FatTree:
    """A three-tier ``k``-ary fat-tree (Al-Fares et al. 2008, Sec. 3).

    Attributes:
        k: ports per switch.
        hosts: ``k^3/4``.
        pods: ``k``.
        core: core switches, ``(k/2)^2``.
        aggregation: aggregation switches, ``k/2`` per pod: ``k^2/2``.
        edge: edge switches, ``k/2`` per pod with ``k/2`` hosts each: ``k^2/2``.
        switches: ``5 k^2/4``.
        host_links: host-edge links, ``k^3/4``.
        edge_links: edge-aggregation links, ``k^3/4``.
        core_links: aggregation-core links, ``k^3/4``.
        links: all links, ``3 k^3/4``.
        bisection_gbps: between two halves of the pods, ``(k^3/8) B``: full bisection.
    """

    k: int
    hosts: int
    pods: int
    core: int
    aggregation: int
    edge: int
    switches: int
    host_links: int
    edge_links: int
    core_links: int
    links: int
    bisection_gbps: float


def fat_tree(k: int, link_gbps: float = 400.0) -> FatTree:
    """Size the three-tier fat-tree of ``k``-port switches.

    Args:
        k: ports per switch, even and >= 4.
        link_gbps: speed of every link, Gb/s.

    Returns:
        The counts of :class:`FatTree`.

    Raises:
        TypeError: ``k`` not an int.
        ValueError: ``k`` odd or < 4, or ``link_gbps`` <= 0.
    """
    _check_radix(k, "k")
    checks.positive("link_gbps", link_gbps)
    half = k // 2
    hosts = k * half * half  # k pods x k/2 edge switches x k/2 hosts
    return FatTree(
        k=k,
        hosts=hosts,
        pods=k,
        core=half * half,
        aggregation=k * half,
        edge=k * half,
        switches=half * half + 2 * k * half,
        host_links=hosts,
        edge_links=k * half * half,  # each edge switch to each aggregation of its pod
        core_links=k * half * half,  # each aggregation switch to k/2 cores
        links=3 * hosts,
        bisection_gbps=hosts / 2 * link_gbps,
    )


def fat_tree_links(k: int) -> list[tuple[Node, Node]]:
    """Wire the ``k``-ary fat-tree link by link, bottom tier first.

    Al-Fares et al. 2008, Sec. 3.2: pod ``p`` has edge switches ``("edge", p, e)``,
    each with ``k/2`` hosts ``("host", p, e, h)`` and a link to every aggregation
    switch ``("agg", p, a)`` of its pod; aggregation switch ``a`` of every pod links
    to the ``k/2`` core switches ``("core", a, c)`` of group ``a``. Every switch uses
    all ``k`` of its ports.

    Args:
        k: ports per switch, even and >= 4.

    Returns:
        The ``3 k^3/4`` links, each ``(lower, upper)``: host-edge, then
        edge-aggregation, then aggregation-core.

    Raises:
        TypeError: ``k`` not an int.
        ValueError: ``k`` odd or < 4.
    """
    _check_radix(k, "k")
    half, pods = k // 2, range(k)
    hosts = [
        (("host", p, e, h), ("edge", p, e))
        for p in pods
        for e in range(half)
        for h in range(half)
    ]
    edges = [
        (("edge", p, e), ("agg", p, a))
        for p in pods
        for e in range(half)
        for a in range(half)
    ]
    cores = [
        (("agg", p, a), ("core", a, c))
        for p in pods
        for a in range(half)
        for c in range(half)
    ]
    return hosts + edges + cores


@dataclass(frozen=True)
class LeafSpine:
    """A two-tier leaf-spine: every leaf has one link to every spine.

    Attributes:
        leaves: leaf switches.
        spines: spine switches, ``u``.
        hosts: ``leaves d``.
        host_links: host-leaf links, ``leaves d``.
        fabric_links: leaf-spine links, ``leaves u``.
        links: all links.
        oversubscription: ``d / u``; 1 is non-blocking.
        bisection_gbps: between two halves of the leaves, ``(leaves/2) min(d, u) B``.
    """

    leaves: int
    spines: int
    hosts: int
    host_links: int
    fabric_links: int
    links: int
    oversubscription: float
    bisection_gbps: float


def leaf_spine(
    radix: int,
    downlinks: int,
    uplinks: int,
    leaves: int | None = None,
    link_gbps: float = 400.0,
) -> LeafSpine:
    """Size a two-tier leaf-spine of ``radix``-port switches.

    Args:
        radix: ports per switch (leaf and spine), even and >= 4.
        downlinks: ``d``, host ports per leaf.
        uplinks: ``u``, spine ports per leaf (so ``u`` spines); ``d + u <= radix``.
        leaves: leaf switches, even, at most ``radix`` (a spine's ports); ``None``:
            ``radix``, the largest network.
        link_gbps: speed of every link, Gb/s.

    Returns:
        The counts of :class:`LeafSpine`.

    Raises:
        TypeError: a count not an int.
        ValueError: a count out of range, or ``link_gbps`` <= 0.
    """
    _check_radix(radix)
    checks.positive_int("downlinks", downlinks)
    checks.positive_int("uplinks", uplinks)
    if downlinks + uplinks > radix:
        raise ValueError(f"downlinks + uplinks must be <= radix={radix}")
    leaves = radix if leaves is None else leaves
    checks.integer("leaves", leaves, low=2)
    if leaves > radix or leaves % 2:
        raise ValueError(f"leaves must be even and in [2, radix={radix}], got {leaves}")
    checks.positive("link_gbps", link_gbps)
    hosts = leaves * downlinks
    return LeafSpine(
        leaves=leaves,
        spines=uplinks,
        hosts=hosts,
        host_links=hosts,
        fabric_links=leaves * uplinks,
        links=hosts + leaves * uplinks,
        oversubscription=downlinks / uplinks,
        # the cut runs through the host ports or the uplinks of one half's leaves
        bisection_gbps=leaves // 2 * min(downlinks, uplinks) * link_gbps,
    )
