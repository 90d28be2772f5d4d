"""The rail-optimised cluster against the fat-tree and against its wired graph.

The counts :func:`rail_cluster` returns are wired switch by switch: every switch must
fit its radix, every NIC have its leaf, and the max-flow between two halves of the
nodes must equal the claimed bisection (non-blocking).
"""

from collections import Counter

import pytest
from aiinfra.hardware.rails import (
    GB200_NVL72,
    HGX_H100,
    ScaleUpDomain,
    all_to_all_seconds,
    rail_cluster,
)
from aiinfra.hardware.topology import fat_tree

from tests.hardware.graphs import B, bisection, port_counts


def _rail_links(c, radix: int, g: int) -> Counter:
    """Wire the counts of ``c``: NIC i of node n on leaf (i, n // d); each leaf linked
    alike to each spine (two tiers) or to each aggregation switch of its pod, and
    aggregation switch a of every pod alike to each core of group a (three tiers)."""
    links, d = Counter(), radix // 2
    lpr_pod = c.leaves_per_rail // c.pods  # leaves of one rail in one pod
    for n in range(c.nodes):
        for i in range(g):
            links[(("nic", n, i), ("leaf", i, n // d))] += 1
    leaves = [("leaf", i, j) for i in range(g) for j in range(c.leaves_per_rail)]
    if c.tiers == 2:
        assert d % c.spines == 0
        for leaf in leaves:
            for s in range(c.spines):
                links[(leaf, ("spine", s))] += d // c.spines
        return links
    agg_pod = c.spines // c.pods
    cores_group = c.core // agg_pod
    up = round(d / c.oversubscription)  # core uplinks of an aggregation switch
    assert d % agg_pod == 0 and up % cores_group == 0
    for _, i, j in leaves:
        for a in range(agg_pod):
            links[(("leaf", i, j), ("agg", j // lpr_pod, a))] += d // agg_pod
    for pod in range(c.pods):
        for a in range(agg_pod):
            for x in range(cores_group):
                links[(("agg", pod, a), ("core", a, x))] += up // cores_group
    return links


@pytest.mark.parametrize(
    ("gpus", "radix", "g", "tiers"),
    [
        (1, 8, 4, 2),
        (12, 8, 2, 2),
        (20, 8, 4, 2),  # 5 nodes: halves of unequal nodes
        (32, 8, 4, 2),  # the largest two-tier network
        (40, 8, 4, 3),  # three pods, parallel links to the core
        (30, 8, 3, 3),  # g does not divide radix/2
        (128, 8, 4, 3),  # the largest three-tier network
    ],
)
def test_rail_cluster_is_realisable_and_non_blocking(gpus, radix, g, tiers):
    c = rail_cluster(gpus, radix=radix, nic_gbps=B, gpus_per_node=g)
    assert c.oversubscription == 1 and c.cross_pod_per_gpu_gbps == B
    links = _rail_links(c, radix, g)
    ports = port_counts(links)
    kinds = Counter(n[0] for n in ports)
    assert c.tiers == tiers and c.rails == g and kinds["nic"] == c.nodes * g >= gpus
    assert kinds["leaf"] == c.leaves and kinds["core"] == c.core
    assert kinds["spine"] + kinds["agg"] == c.spines
    assert c.switches == c.leaves + c.spines + c.core
    assert max(p for n, p in ports.items() if n[0] != "nic") <= radix
    assert sum(links.values()) == c.links and c.optics == 2 * c.links
    assert c.max_gpus <= c.leaves * radix // 2
    nics = sorted(n for n in ports if n[0] == "nic")
    half = len(nics) // 2
    assert bisection(links, nics[:half], nics[half:]) == c.bisection_gbps
    assert c.bisection_per_gpu_gbps == (B if half else 0.0)


@pytest.mark.parametrize(
    ("gpus", "radix", "g", "r"),
    [
        (128, 8, 4, 2),  # four full pods of 32 GPUs, half the core
        (128, 8, 4, 4),  # one core uplink per aggregation switch
        (40, 8, 4, 2),  # three pods, the middle one split by the cut
        (160, 16, 8, 4),  # three pods of 8 nodes, the last one short
        (1024, 16, 8, 8),
    ],
)
def test_oversubscribed_core_is_realisable_and_its_bisection_is_the_max_flow(
    gpus, radix, g, r
):
    c = rail_cluster(gpus, radix=radix, nic_gbps=B, gpus_per_node=g, oversubscription=r)
    full = rail_cluster(gpus, radix=radix, nic_gbps=B, gpus_per_node=g)
    links = _rail_links(c, radix, g)
    ports = port_counts(links)
    assert c.tiers == 3 and c.oversubscription == r
    assert max(p for n, p in ports.items() if n[0] != "nic") <= radix
    assert sum(links.values()) == c.links and c.optics == 2 * c.links
    # pods unchanged; the core links shrink by r, the cores by r at most (a core
    # switch may take several parallel links from each pod)
    assert (c.pods, c.leaves, c.spines) == (full.pods, full.leaves, full.spines)
    assert full.core // r <= c.core < full.core
    assert full.links - c.links == c.spines * (radix // 2) * (r - 1) // r
    nics = sorted(n for n in ports if n[0] == "nic")
    half = len(nics) // 2
    assert bisection(links, nics[:half], nics[half:]) == c.bisection_gbps
    assert c.cross_pod_per_gpu_gbps == B / r


def test_four_full_pods_at_1_to_4_keep_a_quarter_of_the_bisection():
    # By hand: radix 8 (d = 4 ports down per leaf), 4 GPUs a node: a pod has one
    # leaf per rail, 4 nodes, 16 NICs; 128 GPUs are 8 pods. The halves are whole
    # pods, so everything crosses the core, whose uplinks carry 16 / 4 = 4 NIC
    # rates per pod: 4 pods x 4 = 16 NIC rates, a quarter of the 64 NICs of a half.
    c = rail_cluster(128, radix=8, nic_gbps=B, gpus_per_node=4, oversubscription=4)
    assert (c.pods, c.nodes_per_pod) == (8, 4)
    assert (
        c.bisection_gbps
        == 16 * B
        == rail_cluster(128, radix=8, nic_gbps=B, gpus_per_node=4).bisection_gbps / 4
    )


@pytest.mark.parametrize(("radix", "g"), [(8, 4), (16, 8), (64, 8)])
def test_full_rail_cluster_has_the_fat_tree_sizes(radix, g):
    ft = fat_tree(radix)
    three = rail_cluster(ft.hosts, radix=radix, gpus_per_node=g)
    assert (three.tiers, three.switches, three.links) == (3, ft.switches, ft.links)
    # two tiers: k leaves and k/2 spines hold k^2/2 GPUs
    two = rail_cluster(radix * radix // 2, radix=radix, gpus_per_node=g)
    assert (two.tiers, two.switches) == (2, 3 * radix // 2)
    assert rail_cluster(radix * radix // 2 + 1, radix=radix, gpus_per_node=g).tiers == 3


def _all_to_all_by_pairs(domain: ScaleUpDomain, group: int, nbytes: float) -> float:
    """Every ordered pair sends nbytes / group: count each GPU's NVLink and NIC bits."""
    nv, nic = Counter(), Counter()
    for i in range(group):
        for j in range(group):
            if i != j:
                same = i // domain.gpus == j // domain.gpus
                (nv if same else nic)[i] += 8 * nbytes / group
    return max(
        max(nv[i] / (domain.nvlink_gbps * 1e9), nic[i] / (domain.nic_gbps * 1e9))
        for i in range(group)
    )


@pytest.mark.parametrize("domain", [HGX_H100, GB200_NVL72, ScaleUpDomain("x", 3, 8, 2)])
@pytest.mark.parametrize("group", [1, 2, 3, 8, 9, 20, 64, 72, 100])
def test_all_to_all_seconds_matches_pair_by_pair_count(domain, group):
    nbytes = 2.0**20
    expected = _all_to_all_by_pairs(domain, group, nbytes)
    assert all_to_all_seconds(domain, group, nbytes) == pytest.approx(expected)


def test_all_to_all_inside_one_domain_is_the_switch_bound():
    # On one non-blocking switch each GPU sends (p-1)/p of its buffer at its link
    # rate (the bandwidth term of the all-to-all, Thakur et al. 2005).
    nbytes = 1e9
    for d, p in [(HGX_H100, 8), (GB200_NVL72, 64)]:
        expected = (p - 1) / p * nbytes / (d.nvlink_gbps / 8 * 1e9)
        assert all_to_all_seconds(d, p, nbytes) == pytest.approx(expected)
    # 64 GPUs on HGX: 56 of 63 peers behind a 400 Gb/s NIC, 16x the NVL72 time.
    ratio = all_to_all_seconds(HGX_H100, 64, nbytes) / all_to_all_seconds(
        GB200_NVL72, 64, nbytes
    )
    assert ratio == pytest.approx((56 / 50e9) / (63 / 900e9))


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: rail_cluster(64, radix=7), ValueError, "radix"),
        (lambda: rail_cluster(64, radix=2), ValueError, "radix"),
        (lambda: rail_cluster(0), ValueError, "gpus"),
        (lambda: rail_cluster(129, radix=8, gpus_per_node=4), ValueError, "gpus"),
        (lambda: rail_cluster(64, radix=4, gpus_per_node=8), ValueError, "radix"),
        (lambda: rail_cluster(64, gpus_per_node=0), ValueError, "gpus_per_node"),
        (lambda: rail_cluster(64, nic_gbps=-1.0), ValueError, "nic_gbps"),
        (lambda: rail_cluster(64.0), TypeError, "gpus"),
        (lambda: rail_cluster(64, oversubscription=0), ValueError, "oversubscription"),
        (lambda: rail_cluster(64, oversubscription=7), ValueError, "oversubscription"),
        (lambda: all_to_all_seconds(HGX_H100, 0, 1.0), ValueError, "group"),
        (lambda: all_to_all_seconds(HGX_H100, 8, 0.0), ValueError, "bytes_per_gpu"),
        (lambda: all_to_all_seconds(HGX_H100, 8.0, 1.0), TypeError, "group"),
    ],
)
def test_bad_input_raises_naming_the_argument(call, error, name):
    with pytest.raises(error, match=name):
        call()
