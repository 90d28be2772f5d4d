"""NCCL's algorithms in the cost model: trees against NCCL's source, costs by hand.

Ground truths: the tree that NCCL's ``src/graph/trees.cc`` draws in its comment for
14 ranks; the properties Sanders, Speck & Traff (2009) require of a double tree (two
spanning binary trees, no rank inner in both); hop paths walked rank by rank; and
costs worked out by hand on the round links of ``test_cost``.
"""

import math

import pytest
from aiinfra.comm import cost, nccl_model

# alpha = 10 us, beta = 1 ns/B, gamma = 0.1 ns/B, n = 10^6 B: n beta = 1000 us.
LINK = cost.LinkModel(alpha=10e-6, beta=1e-9, gamma=1e-10)
N = 1e6


def test_btree_matches_the_tree_drawn_in_nccl_trees_cc():
    # 0---8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; 2 -> 1, 3; 6 -> 5, 7; 10 -> 9, 11
    drawn = {1: 2, 2: 4, 3: 2, 4: 8, 5: 6, 6: 4, 7: 6, 8: 0}
    drawn |= {9: 10, 10: 12, 11: 10, 12: 8, 13: 12}
    assert [nccl_model.btree_parent(r, 14) for r in range(14)] == [None] + [
        drawn[r] for r in range(1, 14)
    ]


def _root_path(tree: list, r: int) -> list[int]:
    path = [r]
    while tree[path[-1]] is not None:
        path.append(tree[path[-1]])
        assert len(path) <= len(tree), "a cycle"
    return path


@pytest.mark.parametrize("p", [2, 4, 6, 8, 10, 14, 16, 30, 64])
def test_double_tree_is_two_spanning_binary_trees_with_no_rank_inner_in_both(p):
    trees = nccl_model.double_binary_tree(p)
    for tree in trees:
        assert tree.count(None) == 1  # one root, reached from every rank
        roots = {_root_path(tree, r)[-1] for r in range(p)}
        assert len(roots) == 1
        assert all(tree.count(r) <= 2 for r in range(p))  # binary
        assert max(len(_root_path(tree, r)) - 1 for r in range(p)) <= math.ceil(
            math.log2(p)
        )
    inner = [{r for r in range(p) if r in tree} for tree in trees]
    assert inner[0].isdisjoint(inner[1])


def test_double_tree_cost_by_hand():
    # p = 8, depth 3: 6 alpha; rank 2 is inner in tree 1 (n/2 up, n/2 to each of
    # two children) and a leaf in tree 2 (n/2 up): 2n sent; it adds two halves: n.
    t = nccl_model.double_binary_tree_all_reduce_time(N, 8, LINK)
    assert t * 1e6 == pytest.approx(60 + 2000 + 100)
    # p = 2: each rank is the other's only child: n/2 down + n/2 up, adds n/2.
    t = nccl_model.double_binary_tree_all_reduce_time(N, 2, LINK)
    assert t * 1e6 == pytest.approx(20 + 1000 + 50)
    assert nccl_model.double_binary_tree_all_reduce_time(N, 1, LINK) == 0.0


def test_in_network_reduction_sends_n_once_and_beats_the_endpoint_bound():
    assert nccl_model.in_network_all_reduce_time(N, 8, LINK) * 1e6 == pytest.approx(
        20 + 1000
    )
    assert nccl_model.in_network_all_reduce_time(N, 1, LINK) == 0.0
    bytes_only = cost.LinkModel(alpha=0.0, beta=1.0)
    for p in (4, 8, 64):  # endpoint bound 2(p-1)/p n; the switch: n
        ring = cost.ring_all_reduce_time(N, p, bytes_only)
        assert nccl_model.in_network_all_reduce_time(N, p, bytes_only) < ring


@pytest.mark.parametrize(
    ("p", "local_size"), [(2, 1), (8, 2), (8, 4), (24, 3), (64, 8)]
)
def test_ring_inter_node_hops_match_walking_every_chunk(p, local_size):
    def crossings(start: int) -> int:  # hop i -> i+1 leaves a node if i+1 starts one
        hops = range(start, start + 2 * (p - 1))
        return sum((i + 1) % p % local_size == 0 for i in hops)

    walked = max(crossings(s) for s in range(p))
    assert nccl_model.ring_inter_node_hops(p, local_size) == walked


def test_multirail_ring_by_hand():
    # One rail on a uniform link is the flat ring: 2(p-1) a + 2(p-1)/p n b + ...
    t = nccl_model.multirail_ring_all_reduce_time(N, 8, LINK, 4, LINK, rails=1)
    assert t * 1e6 == pytest.approx(140 + 1750 + 87.5)
    # 2 nodes x 8 on ib400 (5 us, 20 ps/B) and nvlink (1 us, 5 ps/B, 1 ps/B):
    # 4 inter-node hops, 26 inside: 46 us; bytes 1.875 n at max(5, 20/8) ps/B.
    n = 2**20
    t = nccl_model.multirail_ring_all_reduce_time(n, 16, "ib400", 8, "nvlink", 8)
    assert t == pytest.approx(46e-6 + 1.875 * n * 5e-12 + 0.9375 * n * 1e-12)
    one_rail = nccl_model.multirail_ring_all_reduce_time(n, 16, "ib400", rails=1)
    assert one_rail == pytest.approx(46e-6 + 1.875 * n * 20e-12 + 0.9375 * n * 1e-12)


def test_hierarchical_rails_share_the_nics():
    # 2 nodes x 4 ranks, 1 NIC: the middle phase all-reduces n/4 at 4 beta:
    # 855 + (20 + 250 x 4 + 12.5) + 780.
    t = cost.hierarchical_all_reduce_time(N, 8, LINK, 4, LINK, rails=1)
    assert t * 1e6 == pytest.approx(855 + 1032.5 + 780)


@pytest.mark.parametrize("p", [2, 4, 8, 16, 64, 1024])
def test_ring_never_beats_rabenseifner_when_p_is_a_power_of_two(p):
    for n in [0.0] + [2.0**k for k in range(0, 40, 3)]:
        for link in ("nvlink", "ib400", LINK):
            ring = cost.ring_all_reduce_time(n, p, link)
            assert ring >= cost.rabenseifner_all_reduce_time(n, p, link)
    assert (
        cost.crossover_size("ring_all_reduce", "rabenseifner_all_reduce", p, "nvlink")
        is None
    )


def test_ring_vs_rabenseifner_table_at_six_ranks():
    # Fold: 2a + 2nb + ng, then p' = 4: 4a + 1.5nb + .75ng; the ring: 10a + 5/3 nb
    # + 5/6 ng. On nvlink they cross at 4a / (11/6 b + 11/12 g) = 396,694 B.
    rows = {r[0]: r for r in nccl_model.ring_vs_rabenseifner_table().rows}
    assert rows[6][1:] == [10.0, 6.0, 1.667, 3.5, "387 KiB"]
    assert rows[8][1:] == [14.0, 6.0, 1.75, 1.75, "never"]


def test_hierarchy_table_by_hand():
    # 2 nodes x 8, 8 NICs: 1-NIC ring 2(15/16) n = 1.875 n per NIC; 8 rails: / 8;
    # hierarchical 2(1/2) n / 8. Steps: 30 against 2 x 7 + 2 x 1 = 16.
    row = nccl_model.hierarchy_table(nodes=(2,)).rows[0]
    assert row[:7] == [2, 16, 30.0, 16.0, 1.875, 0.234, 0.125]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: nccl_model.btree_parent(14, 14),
            r"r must be an int in \[0, 13\], got 14",
        ),
        (lambda: nccl_model.double_binary_tree(0), "p must be an int >= 1"),
        (lambda: nccl_model.ring_inter_node_hops(12, 8), r"local_size \(8\)"),
        (
            lambda: nccl_model.multirail_ring_all_reduce_time(N, 16, LINK, rails=0),
            "rails must be an int >= 1",
        ),
        (
            lambda: cost.hierarchical_all_reduce_time(N, 16, LINK, 8, rails=0),
            "rails must be an int >= 1",
        ),
        (lambda: nccl_model.in_network_all_reduce_time(-1.0, 4, LINK), "n must be"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
