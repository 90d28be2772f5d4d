"""Binomial-tree broadcast and reduce against gloo, from and to every root."""

import torch
import torch.distributed as dist
from aiinfra.comm import binomial_broadcast, binomial_reduce
from aiinfra.distributed import run_distributed

from tests.comm.collective_checks import (
    DIST_OPS,
    DTYPES,
    OPS,
    SIZES,
    assert_reduced_equal,
    groups,
    op_and_check,
    rank_input,
)


def _tree_matches_gloo() -> None:
    for name, g in groups():  # sizes 4, 3 and 2; sub-groups included
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
                    assert torch.equal(x, expected), what
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
                            assert_reduced_equal(x, expected, inputs, op, what)
                        else:  # unlike gloo, other ranks keep their input
                            assert torch.equal(x, inputs[r]), f"{what}: input changed"
        x = torch.arange(15.0).view(3, 5) * (r + 1)  # (3, 5): any shape works
        expected = x.clone()
        dist.broadcast(expected, group=g, group_src=p - 1)
        binomial_broadcast(x, p - 1, g)
        assert torch.equal(x, expected), f"2-D binomial_broadcast group={name}"


def test_binomial_broadcast_and_reduce_match_gloo_on_2_3_and_4_ranks():
    # One spawn of 4 ranks covers groups of 4, 3 ([1, 2, 3]) and 2 ([0, 2], [1, 3]).
    assert run_distributed(_tree_matches_gloo, 4, timeout=120) == [None] * 4
