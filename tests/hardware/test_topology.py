"""Network sizes against Al-Fares et al. and against graphs wired switch by switch.

Each network is also wired as an explicit graph (:mod:`tests.hardware.graphs`): its
switches and links are counted, every switch's ports checked against the radix, and
its bisection bandwidth found as a max-flow from one half of the hosts to the other.
"""

from collections import Counter

import pytest
from aiinfra.hardware.topology import fat_tree, fat_tree_links, leaf_spine

from tests.hardware.graphs import B, bisection, port_counts


def _fat_tree_links(k: int) -> Counter:
    """Al-Fares et al. 2008: pods of k/2 edge and k/2 aggregation switches;
    aggregation switch a of every pod links to core switches (a, 0..k/2-1)."""
    links, h = Counter(), k // 2
    for pod in range(k):
        for e in range(h):
            for host in range(h):
                links[(("host", pod, e, host), ("edge", pod, e))] += 1
            for a in range(h):
                links[(("edge", pod, e), ("agg", pod, a))] += 1
        for a in range(h):
            for c in range(h):
                links[(("agg", pod, a), ("core", a, c))] += 1
    return links


def test_fat_tree_published_sizes():
    # Al-Fares et al. 2008: k = 4 connects 16 hosts with 20 switches;
    # 48-port switches connect 27,648 hosts (with 5 k^2/4 = 2,880 switches).
    small, large = fat_tree(4), fat_tree(48)
    assert (small.hosts, small.switches) == (16, 20)
    assert (large.hosts, large.switches) == (27_648, 2_880)


@pytest.mark.parametrize("k", [4, 6, 8])
def test_fat_tree_counts_match_the_wired_graph(k):
    links = _fat_tree_links(k)
    nodes = Counter(n[0] for n in port_counts(links))
    ft = fat_tree(k, link_gbps=B)
    assert (nodes["host"], nodes["edge"], nodes["agg"], nodes["core"]) == (
        ft.hosts,
        ft.edge,
        ft.aggregation,
        ft.core,
    )
    assert ft.switches == nodes["edge"] + nodes["agg"] + nodes["core"]
    assert sum(links.values()) == ft.links
    by_tier = Counter(v[0] for (_, v), n in links.items() for _ in range(n))
    assert (by_tier["edge"], by_tier["agg"], by_tier["core"]) == (
        ft.host_links,
        ft.edge_links,
        ft.core_links,
    )
    assert all(p == k for n, p in port_counts(links).items() if n[0] != "host")
    hosts = sorted(n for n in port_counts(links) if n[0] == "host")
    half = len(hosts) // 2  # pods 0..k/2-1 against the rest
    assert bisection(links, hosts[:half], hosts[half:]) == ft.bisection_gbps


@pytest.mark.parametrize("k", [4, 6, 8])
def test_fat_tree_links_are_the_wiring_of_al_fares(k):
    # The package's wiring (drawn in the book) is the one wired here from the paper:
    # the same links, each once, and a max-flow bisection of k^3/8 links.
    wired = fat_tree_links(k)
    assert len(set(wired)) == len(wired)
    assert Counter(wired) == _fat_tree_links(k)


@pytest.mark.parametrize(
    ("radix", "down", "up", "leaves"),
    [(8, 6, 2, 8), (8, 4, 4, 8), (8, 2, 6, 4), (12, 9, 3, 6)],
)
def test_leaf_spine_counts_and_bisection_match_the_wired_graph(radix, down, up, leaves):
    links = Counter()
    for leaf in range(leaves):
        for h in range(down):
            links[(("host", leaf, h), ("leaf", leaf))] += 1
        for s in range(up):
            links[(("leaf", leaf), ("spine", s))] += 1
    ls = leaf_spine(radix, down, up, leaves=leaves, link_gbps=B)
    ports = port_counts(links)
    assert Counter(n[0] for n in ports) == {
        "host": ls.hosts,
        "leaf": ls.leaves,
        "spine": ls.spines,
    }
    assert sum(links.values()) == ls.links == ls.host_links + ls.fabric_links
    assert max(p for n, p in ports.items() if n[0] != "host") <= radix
    assert ls.oversubscription == down / up
    hosts = sorted(n for n in ports if n[0] == "host")
    half = len(hosts) // 2
    assert bisection(links, hosts[:half], hosts[half:]) == ls.bisection_gbps


def test_full_leaf_spine_is_the_two_level_fat_tree():
    # k-port switches, k leaves and k/2 spines: k^2/2 hosts, non-blocking.
    ls = leaf_spine(48, 24, 24)
    assert (ls.hosts, ls.leaves + ls.spines, ls.oversubscription) == (1152, 72, 1.0)


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: fat_tree(5), ValueError, "k"),
        (lambda: fat_tree(2), ValueError, "k"),
        (lambda: fat_tree(8, link_gbps=0.0), ValueError, "link_gbps"),
        (lambda: fat_tree(8.0), TypeError, "k"),
        (lambda: fat_tree_links(6.0), TypeError, "k"),
        (lambda: fat_tree_links(7), ValueError, "k"),
        (lambda: leaf_spine(8, 6, 4), ValueError, "downlinks"),
        (lambda: leaf_spine(8, 0, 4), ValueError, "downlinks"),
        (lambda: leaf_spine(8, 4, 0), ValueError, "uplinks"),
        (lambda: leaf_spine(8, 4, 4, leaves=3), ValueError, "leaves"),
        (lambda: leaf_spine(8, 4, 4, leaves=10), ValueError, "leaves"),
    ],
)
def test_bad_input_raises_naming_the_argument(call, error, name):
    with pytest.raises(error, match=name):
        call()
