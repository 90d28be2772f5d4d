"""What NCCL runs, in the alpha-beta-gamma model: rails, double trees and switches.

NCCL does not run the textbook algorithms of :mod:`aiinfra.comm.cost` as they stand (Hu
et al. 2025). Its rings run as several *channels* at once, one per NIC (a *rail*)
between nodes, so that a node's NICs add up; its trees are two binary trees in which
every rank is a leaf at least once (Sanders, Speck & Traff 2009), each carrying half the
data in small pipelined chunks; and where the switches can add (InfiniBand SHARP, NVLink
SHARP in NVSwitch) each rank sends its n bytes up once and receives the sum once.
Notation: n bytes per rank, p ranks, N nodes of p_node ranks (``local_size``), R NICs
(rails) per node, lg = log2. Arguments are checked as in :mod:`aiinfra.comm.cost`.
"""

from __future__ import annotations

from aiinfra import checks
from aiinfra.comm.cost import (
    Link,
    LinkModel,
    _args,
    crossover_size,
    format_bytes,
    get_link,
    hierarchical_all_reduce_time,
    rabenseifner_all_reduce_time,
    ring_all_reduce_time,
)
from aiinfra.report import Table

Tree = list[int | None]  # the parent of every rank; None for the root


def btree_parent(r: int, p: int) -> int | None:
    """The parent of rank r in NCCL's binary tree over p ranks (``ncclGetBtree``).

    Rank 0 is the root. A rank whose lowest set bit is b hangs below r - b if bit
    2b of r is set, else below r + b, or below r - b when r + b does not exist: odd
    ranks are the leaves.
    """
    checks.positive_int("p", p)
    checks.int_in("r", r, 0, p - 1)
    # region btree-parent
    if r == 0:
        return None
    low = r & -r  # the lowest set bit
    up = r - low if r & (2 * low) else r + low
    return up if up < p else r - low
    # endregion


def double_binary_tree(p: int) -> tuple[Tree, Tree]:
    """The two trees of NCCL's double binary tree (``ncclGetDtree``) over p ranks.

    The second tree mirrors the first (r -> p - 1 - r) when p is even, so that the
    odd ranks, leaves of the first tree, are the inner ranks of the second; it is
    the first shifted by one rank when p is odd.

    Returns:
        The parent of every rank in each tree.
    """
    checks.positive_int("p", p)
    # region two-trees
    first = [btree_parent(r, p) for r in range(p)]
    if p % 2 == 0:
        mirror = [first[p - 1 - r] for r in range(p)]
        second = [None if u is None else p - 1 - u for u in mirror]
    else:
        shifted = [first[(r - 1) % p] for r in range(p)]
        second = [None if u is None else (u + 1) % p for u in shifted]
    return first, second
    # endregion


def tree_depth(tree: Tree) -> int:
    """The number of edges on the longest path from a rank up to the root."""

    def depth(r: int) -> int:
        return 0 if tree[r] is None else 1 + depth(tree[r])

    return max(depth(r) for r in range(len(tree)))


def double_binary_tree_all_reduce_time(n: float, p: int, link: Link) -> float:
    """Each tree reduces n/2 bytes to its root and broadcasts them back, pipelined.

    The chunks climb and descend the deeper tree, 2 depth latencies; meanwhile the
    busiest rank sends n/2 to its parent and n/2 to each child in both trees, and
    reduces n/2 per child.
    """
    a, b, g = _args(n, p, link)
    # region double-tree-time
    trees = double_binary_tree(p)
    children = [[t.count(r) for t in trees] for r in range(p)]
    sent = max(
        sum((t[r] is not None) + c for t, c in zip(trees, kids, strict=True))
        for r, kids in enumerate(children)
    )
    reduced = max(sum(kids) for kids in children)
    return 2 * max(map(tree_depth, trees)) * a + sent * n / 2 * b + reduced * n / 2 * g
    # endregion


def in_network_all_reduce_time(n: float, p: int, link: Link) -> float:
    """In-network reduction: n bytes up to the switch, the sum back down, overlapped.

    The switch adds at line rate, so the ranks reduce nothing; its latency is folded
    into the two messages' alpha.
    """
    a, b, _ = _args(n, p, link)
    return 0.0 if p == 1 else 2 * a + n * b


def ring_inter_node_hops(p: int, local_size: int) -> int:
    """How many of the 2(p-1) hops of a ring all-reduce's chunk cross a node.

    A ring over N nodes of p_node ranks, in rank order, crosses N node boundaries per
    lap of p hops; 2(p-1) hops are two laps less two hops, which miss a boundary unless
    p_node < 3.
    """
    checks.positive_int("local_size", local_size)
    if p % local_size:
        raise ValueError(f"local_size ({local_size}) must divide p ({p})")
    nodes = p // local_size
    return 0 if nodes == 1 else 2 * nodes - max(0, 3 - local_size)


def multirail_ring_all_reduce_time(
    n: float,
    p: int,
    link: Link,
    local_size: int = 8,
    local_link: Link = "nvlink",
    rails: int = 8,
) -> float:
    """A pipelined ring all-reduce split into ``rails`` channels, one per NIC.

    Each channel's ring leaves every node through its own NIC of ``link``, so the
    node's cross traffic, 2(p-1)/p n, is spread over ``rails`` NICs; inside a node
    each rank moves its 2(p-1)/p n over ``local_link``. The slower of the two bounds
    the bandwidth term. The latency is the path of one chunk: 2(p-1) hops, of which
    :func:`ring_inter_node_hops` pay the network's alpha and the rest the node's.
    """
    _args(n, p, link)
    checks.positive_int("rails", rails)
    # region multirail-ring-time
    hops, inter = 2 * (p - 1), ring_inter_node_hops(p, local_size)
    net, node = get_link(link), get_link(local_link)
    if inter == 0:
        return ring_all_reduce_time(n, p, node)
    latency = inter * net.alpha + (hops - inter) * node.alpha
    beta = max(node.beta, net.beta / rails)
    return latency + (p - 1) / p * n * (2 * beta + node.gamma)
    # endregion


def ring_vs_rabenseifner_table(
    ps: tuple[int, ...] = (2, 4, 8, 64, 1024, 6, 12, 24), link: Link = "nvlink"
) -> Table:
    """Steps, bytes and the crossover of the ring and Rabenseifner's algorithm.

    The coefficients are read off the cost functions, by pricing on unit links. For
    p a power of two the bandwidth terms are equal and the ring has more steps, so
    it never wins; a fold (p not a power of two) makes Rabenseifner send more.
    """
    unit_alpha, unit_beta = LinkModel(1.0, 0.0), LinkModel(0.0, 1.0)
    ring, rab = ring_all_reduce_time, rabenseifner_all_reduce_time
    rows = []
    for p in ps:
        above = crossover_size(rab, ring, p, link)  # ring faster above this size
        rows.append(
            [p]
            + [f(0.0, p, unit_alpha) for f in (ring, rab)]
            + [round(f(1.0, p, unit_beta), 3) for f in (ring, rab)]
            + [format_bytes(above) if above else "never"]
        )
    return Table(
        ["p", "ring steps", "Rabenseifner steps"]
        + ["ring beta term (x n)", "Rabenseifner beta term (x n)", "ring faster above"],
        rows,
        note="Beta term: the bytes sent one after another, the factor of n beta. "
        "Alpha-beta-gamma model (Thakur, Rabenseifner & Gropp 2005).",
        stamp="link {link}",
        fields={"link": get_link(link).name},
    )


def hierarchy_table(
    nodes: tuple[int, ...] = (2, 4, 16, 64),
    local_size: int = 8,
    rails: int = 8,
    link: Link = "ib400",
    local_link: Link = "nvlink",
) -> Table:
    """Flat rings on one NIC and on ``rails`` NICs against the hierarchical all-reduce.

    Per node count: the steps in series (pricing alpha = 1), the bytes each NIC
    carries (pricing the network's bytes only), and the size below which the
    hierarchical all-reduce beats the multi-rail ring.
    """
    steps = LinkModel(1.0, 0.0)
    nic_bytes, free = LinkModel(0.0, 1.0), LinkModel(0.0, 0.0)
    rows = []
    for count in nodes:
        p = count * local_size

        def flat(
            n: float, p: int, net: Link, r: int = rails, loc: Link = local_link
        ) -> float:
            return multirail_ring_all_reduce_time(n, p, net, local_size, loc, r)

        def hier(n: float, p: int, net: Link, loc: Link = local_link) -> float:
            return hierarchical_all_reduce_time(n, p, net, local_size, loc, rails)

        below = crossover_size(hier, flat, p, link)
        rows.append(
            [count, p, flat(0.0, p, steps, loc=steps), hier(0.0, p, steps, steps)]
            + [round(flat(1.0, p, nic_bytes, 1, free), 3)]
            + [round(f(1.0, p, nic_bytes, loc=free), 3) for f in (flat, hier)]
            + [format_bytes(below) if below else "never"]
        )
    return Table(
        ["nodes N", "ranks p", "ring steps", "hierarchical steps"]
        + ["1-NIC ring: bytes per NIC (x n)", f"{rails}-rail ring (x n)"]
        + ["hierarchical (x n)", "hierarchical faster below"],
        rows,
        note="Steps in series; bytes each NIC sends. Alpha-beta-gamma model.",
        stamp="{local} ranks per node over {local_link}, {rails} NICs of {link} per "
        "node",
        fields={
            "local": local_size,
            "local_link": get_link(local_link).name,
            "rails": rails,
            "link": get_link(link).name,
        },
    )


def nccl_algorithm_table(
    p: int = 64, sizes: tuple[float, ...] = (2.0**16, 2.0**28), link: Link = "ib400"
) -> Table:
    """NCCL's three all-reduce algorithms at p ranks: their terms and times.

    The terms are read off the cost functions by pricing on unit links.
    """
    algorithms = {
        "ring": ring_all_reduce_time,
        "double binary tree": double_binary_tree_all_reduce_time,
        "in-network (SHARP, NVLS)": in_network_all_reduce_time,
    }
    unit_alpha, unit_beta = LinkModel(1.0, 0.0), LinkModel(0.0, 1.0)
    rows = [
        [name, f(0.0, p, unit_alpha), round(f(1.0, p, unit_beta), 3)]
        + [f(n, p, link) * 1e6 for n in sizes]
        for name, f in algorithms.items()
    ]
    return Table(
        ["algorithm", "latency (x alpha)", "bytes sent (x n)"]
        + [f"time at {format_bytes(n)} (us)" for n in sizes],
        rows,
        note="Bytes: those the busiest rank sends. Alpha-beta-gamma model.",
        stamp="p = {p}, link {link}",
        fields={"p": p, "link": get_link(link).name},
    )


#: NCCL's protocols (Hu et al. 2025): bytes per store and data bytes in it. LL
#: writes 8-byte words, 4 bytes of data and a 4-byte flag the receiver polls; LL128
#: 128-byte lines with 8 bytes of flag; Simple moves large chunks behind a fence.
PROTOCOLS: dict[str, tuple[int, int]] = {"LL": (8, 4), "LL128": (128, 120)}


def protocol_table() -> Table:
    """The share of each protocol's bytes that is data, from :data:`PROTOCOLS`."""
    rows = [
        [name, store, data, round(data / store, 4)]
        for name, (store, data) in PROTOCOLS.items()
    ]
    return Table(
        ["protocol", "bytes per store", "data bytes", "data share of bandwidth"],
        rows + [["Simple", "a chunk", "a chunk", 1.0]],
        note="Simple waits on a memory fence per chunk instead of a flag per store.",
        words=(0, 1, 2),  # Simple stores a whole chunk: words, translated
    )
