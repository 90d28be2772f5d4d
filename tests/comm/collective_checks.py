"""Shared pieces of the collective tests: inputs, sub-groups and the comparison rule.

Every rank's input is a pure function of (group rank, case), so each rank can rebuild
all p inputs and bound the rounding error of a float reduction without asking the
others. The ground truth is always torch.distributed's own collective over gloo.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)
OPS = ("sum", "prod", "max", "min")
SIZES = (1, 7, 13, 1003)  # 1 < p, primes, and 1000 + 3: never a multiple of p
DIST_OPS = {
    "sum": dist.ReduceOp.SUM,
    "prod": dist.ReduceOp.PRODUCT,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
}


def rank_input(rank: int, n: int, dtype: torch.dtype, op: str) -> torch.Tensor:
    """A deterministic input of n elements for group rank ``rank``."""
    g = torch.Generator().manual_seed(1000 * rank + 10 * n + OPS.index(op))
    if dtype.is_floating_point:
        if op == "prod":  # magnitudes in [0.5, 1.5): no overflow or underflow
            sign = torch.randint(0, 2, (n,), generator=g) * 2 - 1
            return (sign * (0.5 + torch.rand(n, generator=g, dtype=torch.float64))).to(
                dtype
            )
        return torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
    if op == "prod":  # |product| <= 3^4: no int32 overflow
        return torch.randint(-3, 4, (n,), generator=g, dtype=dtype)
    return torch.randint(-1000, 1000, (n,), generator=g, dtype=dtype)


def groups() -> list[tuple[str, dist.ProcessGroup | None]]:
    """Groups of sizes 4, 3 and 2 on a 4-rank world; each rank gets those it is in.

    Every rank calls ``new_group`` for all of them in the same order, as torch
    requires. The trio [1, 2, 3] does not start at global rank 0, and the pairs
    [0, 2] and [1, 3] run side by side, so group ranks and global ranks differ.
    """
    rank = dist.get_rank()
    trio = dist.new_group([1, 2, 3])
    pairs = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    out: list[tuple[str, dist.ProcessGroup | None]] = [("world", None)]
    if rank != 0:
        out.append(("trio", trio))
    out.append(("pair", pairs[rank % 2]))
    return out


def assert_reduced_equal(
    actual: torch.Tensor,
    expected: torch.Tensor,
    inputs: list[torch.Tensor],
    op: str,
    what: str,
) -> None:
    """Assert ``actual`` equals the reference reduction ``expected`` of ``inputs``.

    Ints, max and min are exact whatever the order, so they must match bit for bit.
    A float sum or product of p terms in any order is within (p - 1) u S of the exact
    value, with u = eps / 2 the unit roundoff and S = sum |x_j| (sum) or prod |x_j|
    (prod, to first order); Higham, *Accuracy and Stability of Numerical Algorithms*
    (2002), Ch. 3-4. Two orders therefore differ by at most 2 (p - 1) u S =
    (p - 1) eps S; we allow p eps S per element. A missing or doubled term is off by
    |x_j|, far above this bound.
    """
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
    if not actual.dtype.is_floating_point or op in ("max", "min"):
        assert torch.equal(actual, expected), f"{what}: {actual} != {expected}"
        return
    x = torch.stack([t.double().abs() for t in inputs])  # (p, n)
    s = x.sum(0) if op == "sum" else x.prod(0)  # (n,)
    bound = len(inputs) * torch.finfo(actual.dtype).eps * s
    err = (actual.double() - expected.double()).abs().view(-1)
    assert bool((err <= bound).all()), f"{what}: max error {err.max()} > bound"


def assert_same_on_all_ranks(t: torch.Tensor, group: dist.ProcessGroup | None) -> None:
    """Assert every rank of ``group`` holds a bit-identical ``t``."""
    p = dist.get_world_size(group)
    copies = [torch.empty_like(t) for _ in range(p)]
    dist.all_gather(copies, t, group=group)
    assert all(torch.equal(c, t) for c in copies), "ranks disagree"


def op_and_check(op: str, dtype: torch.dtype) -> tuple[object, bool]:
    """Return (op argument, check_consistency) for a case.

    Spreads both spellings of op (name and ``dist.ReduceOp``) and both settings of
    ``check_consistency`` over the cases.
    """
    op_arg = DIST_OPS[op] if dtype in (torch.int32, torch.float64) else op
    return op_arg, dtype != torch.int64


def check_all_reduce(
    all_reduce: Callable[..., None],
    name: str,
    group: dist.ProcessGroup | None,
    sizes: tuple[int, ...] = SIZES,
    dtypes: tuple[torch.dtype, ...] = DTYPES,
) -> None:
    """Check ``all_reduce(x, op, group, check_consistency=...)`` against gloo.

    Every size, dtype and op; then a 2-D tensor; the result must also be identical
    on all ranks.
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    for n in sizes:
        for dtype in dtypes:
            for op in OPS:
                what = f"{name} n={n} {dtype} {op}"
                inputs = [rank_input(j, n, dtype, op) for j in range(p)]
                expected = inputs[r].clone()
                dist.all_reduce(expected, DIST_OPS[op], group=group)
                op_arg, check = op_and_check(op, dtype)
                x = inputs[r].clone()
                all_reduce(x, op_arg, group, check_consistency=check)
                assert_reduced_equal(x, expected, inputs, op, what)
                if op == "sum" and n == sizes[-1]:
                    assert_same_on_all_ranks(x, group)
    x = torch.arange(15.0).view(3, 5) * (r + 1)  # 2-D: reduced as its flat view
    expected = x.clone()
    dist.all_reduce(expected, group=group)
    all_reduce(x, "sum", group)
    assert torch.equal(x, expected), f"2-D {name}"
