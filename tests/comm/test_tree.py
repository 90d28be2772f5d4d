"""Binomial-tree broadcast and reduce against gloo, from and to every root."""

import pytest
import torch
import torch.distributed as dist
from aiinfra.comm import binomial_broadcast, binomial_reduce

from tests.comm.collective_checks import (
    DIST_OPS,
    DTYPES,
    OPS,
    SIZES,
    expect,
    expect_reduced_equal,
    op_and_check,
    rank_input,
    spawned_results,
)


def tree_checks(groups) -> list[str]:
    """Rank side: broadcast from and reduce to every root of each group."""
    failures: list[str] = []
    for name, g in groups:  # sizes 4, 3 and 2; sub-groups included
        r, p = dist.get_rank(g), dist.get_world_size(g)
        for root in range(p):  # every src and dst, as group ranks
            for n in SIZES:
                for dtype in DTYPES:
                    what = f"binomial_broadcast group={name} src={root} n={n} {dtype}"
                    x = rank_input(r, n, dtype, "sum")
                    expected = x.clone()
                    dist.broadcast(expected, group=g, group_src=root)
                    check = dtype != torch.int64
                    binomial_broadcast(x, root, g, check_consistency=check)
                    expect(failures, torch.equal(x, expected), what)
                    for op in OPS:
                        what = f"binomial_reduce group={name} dst={root} n={n} "
                        what += f"{dtype} {op}"
                        inputs = [rank_input(j, n, dtype, op) for j in range(p)]
                        expected = inputs[r].clone()
                        dist.reduce(expected, op=DIST_OPS[op], group=g, group_dst=root)
                        op_arg, check = op_and_check(op, dtype)
                        x = inputs[r].clone()
                        binomial_reduce(x, root, op_arg, g, check_consistency=check)
                        if r == root:
                            expect_reduced_equal(
                                failures, x, expected, inputs, op, what
                            )
                        else:  # unlike gloo, other ranks keep their input
                            kept = torch.equal(x, inputs[r])
                            expect(failures, kept, f"{what}: input changed")
        x = torch.arange(15.0).view(3, 5) * (r + 1)  # (3, 5): any shape works
        expected = x.clone()
        dist.broadcast(expected, group=g, group_src=p - 1)
        binomial_broadcast(x, p - 1, g)
        expect(failures, torch.equal(x, expected), f"2-D broadcast group={name}")
    return failures


@pytest.mark.slow
def test_binomial_broadcast_and_reduce_match_gloo_on_2_3_and_4_ranks():
    # One spawn of 4 ranks covers groups of 4, 3 ([1, 2, 3]) and 2 ([0, 2], [1, 3]).
    for rank, r in enumerate(spawned_results()):
        assert r["tree_checks"] == [], f"rank {rank}: {r['tree_checks'][:5]}"
