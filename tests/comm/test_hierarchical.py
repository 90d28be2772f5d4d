"""Hierarchical all-reduce on 4 ranks as 2 nodes x 2, 4 x 1 and 1 x 4, against gloo."""

import pytest
import torch.distributed as dist
from aiinfra.comm import Hierarchy, hierarchical_all_reduce
from aiinfra.distributed import rank_device

from tests.comm.collective_checks import (
    DTYPES,
    check_all_reduce,
    expect,
    spawned_results,
)


def hierarchical_checks(groups) -> list[str]:
    """Rank side: the sub-groups of each hierarchy, then the all-reduce on each."""
    failures: list[str] = []
    rank, device = dist.get_rank(), rank_device()
    # Created once each, by every rank, in the same order.
    hierarchies = {L: Hierarchy.create(L) for L in (2, 1, 4)}
    trio = dict(groups).get("trio")  # [1, 2, 3]; rank 0 is not in it
    h = hierarchies[2]  # nodes {0, 1} and {2, 3}
    layout = (h.num_nodes, h.node_rank, h.local_rank)
    expect(failures, layout == (2, rank // 2, rank % 2), f"2x2 layout {layout}")
    intra = dist.get_process_group_ranks(h.intra_group)
    inter = dist.get_process_group_ranks(h.inter_group)
    expect(failures, intra == [rank - rank % 2, rank | 1], f"intra group {intra}")
    expect(failures, inter == [rank % 2, rank % 2 + 2], f"inter group {inter}")
    expect(failures, dist.get_rank(h.intra_group) == h.local_rank, "intra rank")
    expect(failures, dist.get_rank(h.inter_group) == h.node_rank, "inter rank")
    for L, h in hierarchies.items():

        def all_reduce(x, op, group, check_consistency=True, h=h):
            hierarchical_all_reduce(x, h, op, check_consistency=check_consistency)

        # The degenerate shapes (one rank per node, one node) with fewer cases.
        light = {} if L == 2 else {"sizes": (3, 1003), "dtypes": DTYPES[1:3]}
        what = f"hierarchical {4 // L}x{L}"
        check_all_reduce(failures, all_reduce, what, None, device, **light)
    # A parent sub-group: [1, 2, 3] as 3 nodes of one rank; only its members call
    # Hierarchy.create on it.
    if trio is not None:
        h = Hierarchy.create(1, group=trio)
        members = dist.get_process_group_ranks(h.inter_group)
        expect(failures, members == [1, 2, 3], f"trio inter group {members}")

        def all_reduce(x, op, group, check_consistency=True):
            hierarchical_all_reduce(x, h, op, check_consistency=check_consistency)

        what = "hierarchical trio 3x1"
        check_all_reduce(failures, all_reduce, what, trio, device, sizes=(3, 1003))
    return failures


@pytest.mark.slow
def test_hierarchical_all_reduce_matches_gloo_on_2_nodes_of_2():
    for rank, r in enumerate(spawned_results()):
        assert r["hierarchical_checks"] == [], f"rank {rank}"
