"""Hierarchical all-reduce on 4 ranks as 2 nodes x 2, 4 x 1 and 1 x 4, against gloo."""

import torch.distributed as dist
from aiinfra.comm import Hierarchy, hierarchical_all_reduce
from aiinfra.distributed import run_distributed

from tests.comm.collective_checks import DTYPES, check_all_reduce


def _hierarchical_matches_gloo() -> None:
    rank = dist.get_rank()
    # Created once each, by every rank, in the same order.
    hierarchies = {L: Hierarchy.create(L) for L in (2, 1, 4)}
    trio = dist.new_group([1, 2, 3])
    h = hierarchies[2]  # nodes {0, 1} and {2, 3}
    assert (h.num_nodes, h.node_rank, h.local_rank) == (2, rank // 2, rank % 2)
    assert dist.get_process_group_ranks(h.intra_group) == [rank - rank % 2, rank | 1]
    assert dist.get_process_group_ranks(h.inter_group) == [rank % 2, rank % 2 + 2]
    assert dist.get_rank(h.intra_group) == h.local_rank
    assert dist.get_rank(h.inter_group) == h.node_rank
    for L, h in hierarchies.items():

        def all_reduce(x, op, group, check_consistency=True, h=h):
            hierarchical_all_reduce(x, h, op, check_consistency=check_consistency)

        # The degenerate shapes (one rank per node, one node) with fewer cases.
        light = {} if L == 2 else {"sizes": (3, 1003), "dtypes": DTYPES[1:3]}
        check_all_reduce(all_reduce, f"hierarchical {4 // L}x{L}", None, **light)
    if rank != 0:  # a parent sub-group: [1, 2, 3] as 3 nodes of one rank
        h = Hierarchy.create(1, group=trio)
        assert dist.get_process_group_ranks(h.inter_group) == [1, 2, 3]

        def all_reduce(x, op, group, check_consistency=True):
            hierarchical_all_reduce(x, h, op, check_consistency=check_consistency)

        check_all_reduce(all_reduce, "hierarchical trio 3x1", trio, sizes=(3, 1003))


def test_hierarchical_all_reduce_matches_gloo_on_2_nodes_of_2():
    assert run_distributed(_hierarchical_matches_gloo, 4, timeout=120) == [None] * 4
