"""Ring all-reduce, reduce-scatter and all-gather against torch's own collectives."""

import pytest
import torch
import torch.distributed as dist
from aiinfra.comm import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from aiinfra.comm._validate import SUPPORTED_DTYPES
from aiinfra.distributed import rank_device

from tests.comm.collective_checks import (
    DIST_OPS,
    DTYPES,
    OPS,
    check_all_reduce,
    expect,
    expect_reduced_equal,
    op_and_check,
    rank_input,
    spawned_results,
)


def ring_checks(groups) -> list[str]:
    """Rank side: every ring collective on each group, on this rank's device.

    The NCCL test (``test_nccl``) runs this same function on the GPUs' world group.
    """
    failures: list[str] = []
    device = rank_device()
    for name, g in groups:
        r, p = dist.get_rank(g), dist.get_world_size(g)
        check_all_reduce(
            failures, ring_all_reduce, f"ring_all_reduce group={name}", g, device
        )
        # Every supported dtype; values < 30 keep a 4-rank sum exact even in int8.
        for dtype in SUPPORTED_DTYPES:
            for op in ("sum", "max"):
                x = ((torch.arange(13, device=device) * (r + 1)) % 30).to(dtype)
                expected = x.clone()
                dist.all_reduce(expected, DIST_OPS[op], group=g)
                ring_all_reduce(x, op, g)
                expect(failures, torch.equal(x, expected), f"{dtype} {op} {name}")
        for m in (1, 5, 251):  # output elements per rank
            for dtype in DTYPES:
                for op in OPS:
                    what = f"ring_reduce_scatter group={name} m={m} {dtype} {op}"
                    inputs = [
                        rank_input(j, p * m, dtype, op).to(device) for j in range(p)
                    ]
                    # reduce_scatter_single: torch 2.13's reduce_scatter_tensor.
                    # The error bound needs block r of every rank's input.
                    expected = inputs[r].new_empty(m)
                    dist.reduce_scatter_single(
                        expected, inputs[r].clone(), DIST_OPS[op], group=g
                    )
                    blocks = [t.tensor_split(p)[r] for t in inputs]
                    op_arg, check = op_and_check(op, dtype)
                    x, out = inputs[r].clone(), inputs[r].new_empty(m)
                    ring_reduce_scatter(out, x, op_arg, g, check_consistency=check)
                    expect_reduced_equal(failures, out, expected, blocks, op, what)
                    expect(failures, torch.equal(x, inputs[r]), f"{what}: input")
            for dtype in DTYPES:
                what = f"ring_all_gather group={name} m={m} {dtype}"
                x = rank_input(r, m, dtype, "sum").to(device)
                expected = x.new_empty(p * m)
                dist.all_gather_single(expected, x, group=g)
                out = x.new_empty(p * m)
                ring_all_gather(out, x, g, check_consistency=dtype != torch.int64)
                expect(failures, torch.equal(out, expected), what)
                # In place: the input is block r of the output, as torch allows.
                out = x.new_zeros(p, m)  # (p, m)
                out[r] = x
                ring_all_gather(out, out[r], g)
                expect(
                    failures, torch.equal(out.view(-1), expected), f"in-place {what}"
                )
        # Pipelined: each chunk cut into pieces, more pieces than elements included.
        for segments in (2, 3, 8):
            for n in (1, 13, 4 * p + 1):
                for dtype, op in ((torch.float64, "sum"), (torch.int32, "max")):
                    x = ((torch.arange(n, device=device) * (r + 2)) % 30).to(dtype)
                    expected = x.clone()
                    dist.all_reduce(expected, DIST_OPS[op], group=g)
                    ring_all_reduce(x, op, g, segments=segments)
                    what = f"ring_all_reduce segments={segments} n={n} {op} {name}"
                    expect(failures, torch.equal(x, expected), what)
            for m in (1, 5):
                what = f"ring_reduce_scatter segments={segments} m={m} {name}"
                x = ((torch.arange(p * m, device=device) * (r + 2)) % 30).double()
                expected = x.new_empty(m)
                dist.reduce_scatter_single(expected, x.clone(), group=g)
                out = x.new_empty(m)
                ring_reduce_scatter(out, x, "sum", g, segments=segments)
                expect(failures, torch.equal(out, expected), what)
                what = f"ring_all_gather segments={segments} m={m} {name}"
                x = rank_input(r, m, torch.float64, "sum").to(device)
                expected = x.new_empty(p * m)
                dist.all_gather_single(expected, x, group=g)
                out = x.new_empty(p * m)
                ring_all_gather(out, x, g, segments=segments)
                expect(failures, torch.equal(out, expected), what)
    return failures


@pytest.mark.slow
def test_ring_collectives_match_gloo_on_2_3_and_4_ranks():
    # One spawn of 4 ranks covers groups of 4, 3 ([1, 2, 3]) and 2 ([0, 2], [1, 3]).
    for rank, r in enumerate(spawned_results()):
        assert r["ring_checks"] == [], f"rank {rank}: {r['ring_checks'][:5]}"
