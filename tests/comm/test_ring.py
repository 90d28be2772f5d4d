"""Ring all-reduce, reduce-scatter and all-gather against gloo's own collectives."""

import torch
import torch.distributed as dist
from aiinfra.comm import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from aiinfra.comm._validate import SUPPORTED_DTYPES
from aiinfra.distributed import run_distributed

from tests.comm.collective_checks import (
    DIST_OPS,
    DTYPES,
    OPS,
    assert_reduced_equal,
    check_all_reduce,
    groups,
    op_and_check,
    rank_input,
)


def _ring_matches_gloo() -> None:
    for name, g in groups():  # sizes 4, 3 and 2; sub-groups included
        r, p = dist.get_rank(g), dist.get_world_size(g)
        check_all_reduce(ring_all_reduce, f"ring_all_reduce group={name}", g)
        # Every supported dtype; values < 30 keep a 4-rank sum exact even in int8.
        for dtype in SUPPORTED_DTYPES:
            for op in ("sum", "max"):
                x = ((torch.arange(13) * (r + 1)) % 30).to(dtype)
                expected = x.clone()
                dist.all_reduce(expected, DIST_OPS[op], group=g)
                ring_all_reduce(x, op, g)
                assert torch.equal(x, expected), f"{dtype} {op} group={name}"
        for m in (1, 5, 251):  # output elements per rank
            for dtype in DTYPES:
                for op in OPS:
                    what = f"ring_reduce_scatter group={name} m={m} {dtype} {op}"
                    inputs = [rank_input(j, p * m, dtype, op) for j in range(p)]
                    # reduce_scatter_single: torch 2.13's reduce_scatter_tensor.
                    # The error bound needs block r of every rank's input.
                    expected = torch.empty(m, dtype=dtype)
                    dist.reduce_scatter_single(
                        expected, inputs[r].clone(), DIST_OPS[op], group=g
                    )
                    blocks = [t.tensor_split(p)[r] for t in inputs]
                    op_arg, check = op_and_check(op, dtype)
                    x, out = inputs[r].clone(), torch.empty(m, dtype=dtype)
                    ring_reduce_scatter(out, x, op_arg, g, check_consistency=check)
                    assert_reduced_equal(out, expected, blocks, op, what)
                    assert torch.equal(x, inputs[r]), f"{what}: input was modified"
            for dtype in DTYPES:
                what = f"ring_all_gather group={name} m={m} {dtype}"
                x = rank_input(r, m, dtype, "sum")
                expected = torch.empty(p * m, dtype=dtype)
                dist.all_gather_single(expected, x, group=g)
                out = torch.empty(p * m, dtype=dtype)
                ring_all_gather(out, x, g, check_consistency=dtype != torch.int64)
                assert torch.equal(out, expected), what
                # In place: the input is block r of the output, as torch allows.
                out = torch.zeros(p, m, dtype=dtype)  # (p, m)
                out[r] = x
                ring_all_gather(out, out[r], g)
                assert torch.equal(out.view(-1), expected), f"in-place {what}"


def test_ring_collectives_match_gloo_on_2_3_and_4_ranks():
    # One spawn of 4 ranks covers groups of 4, 3 ([1, 2, 3]) and 2 ([0, 2], [1, 3]).
    assert run_distributed(_ring_matches_gloo, 4, timeout=120) == [None] * 4
