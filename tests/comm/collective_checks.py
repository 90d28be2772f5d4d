"""Shared pieces of the collective tests: inputs, sub-groups, the comparison rule and
the one spawn they share.

Every rank's input is a pure function of (group rank, case), so each rank can rebuild
all p inputs and bound the rounding error of a float reduction without asking the
others. The ground truth is always torch.distributed's own collective on the same
backend (gloo here, NCCL in ``test_nccl``). Starting ranks costs seconds each, so the
rank-side checks of the ring, tree, doubling, all-to-all, hierarchical and mismatch
tests run in one spawn of 4 gloo ranks (:func:`spawned_results`, cached for the
session) and return what they found; each test asserts on its part.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from tests.shared_spawn import shared_results

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


def expect(failures: list[str], ok: bool, what: str) -> None:
    """Record ``what`` in ``failures`` unless ``ok``.

    The rank side records instead of raising: a rank that stopped at its first
    mismatch would leave its peers waiting in the next collective, so every rank runs
    every check and the test asserts on the list it returns.
    """
    if not ok:
        failures.append(what)


def expect_reduced_equal(
    failures: list[str],
    actual: torch.Tensor,
    expected: torch.Tensor,
    inputs: list[torch.Tensor],
    op: str,
    what: str,
) -> None:
    """Expect ``actual`` to equal the reference reduction ``expected`` of ``inputs``.

    Ints, max and min are exact whatever the order, so they must match bit for bit.
    A float sum or product of p terms in any order is within (p - 1) u S of the exact
    value, with u = eps / 2 the unit roundoff and S = sum |x_j| (sum) or prod |x_j|
    (prod, to first order); Higham, *Accuracy and Stability of Numerical Algorithms*
    (2002), Ch. 3-4. Two orders therefore differ by at most 2 (p - 1) u S =
    (p - 1) eps S; we allow p eps S per element. A missing or doubled term is off by
    |x_j|, far above this bound.
    """
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        failures.append(f"{what}: shape or dtype differs")
        return
    if not actual.dtype.is_floating_point or op in ("max", "min"):
        expect(failures, torch.equal(actual, expected), f"{what}: not bitwise equal")
        return
    x = torch.stack([t.double().abs() for t in inputs])  # (p, n)
    s = x.sum(0) if op == "sum" else x.prod(0)  # (n,)
    bound = len(inputs) * torch.finfo(actual.dtype).eps * s
    err = (actual.double() - expected.double()).abs().view(-1)
    expect(failures, bool((err <= bound).all()), f"{what}: error > bound")


def expect_same_on_all_ranks(
    failures: list[str], t: torch.Tensor, group: dist.ProcessGroup | None, what: str
) -> None:
    """Expect every rank of ``group`` to hold a bit-identical ``t``."""
    p = dist.get_world_size(group)
    copies = [torch.empty_like(t) for _ in range(p)]
    dist.all_gather(copies, t, group=group)
    expect(failures, all(torch.equal(c, t) for c in copies), f"{what}: ranks differ")


def op_and_check(op: str, dtype: torch.dtype) -> tuple[object, bool]:
    """Return (op argument, check_consistency) for a case.

    Spreads both spellings of op (name and ``dist.ReduceOp``) and both settings of
    ``check_consistency`` over the cases.
    """
    op_arg = DIST_OPS[op] if dtype in (torch.int32, torch.float64) else op
    return op_arg, dtype != torch.int64


def check_all_reduce(
    failures: list[str],
    all_reduce: Callable[..., None],
    name: str,
    group: dist.ProcessGroup | None,
    device: torch.device,
    sizes: tuple[int, ...] = SIZES,
    dtypes: tuple[torch.dtype, ...] = DTYPES,
) -> None:
    """Check ``all_reduce(x, op, group, check_consistency=...)`` against torch's.

    Every size, dtype and op, on ``device``; then a 2-D tensor; the result must also
    be identical on all ranks.
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    for n in sizes:
        for dtype in dtypes:
            for op in OPS:
                what = f"{name} n={n} {dtype} {op}"
                inputs = [rank_input(j, n, dtype, op).to(device) for j in range(p)]
                expected = inputs[r].clone()
                dist.all_reduce(expected, DIST_OPS[op], group=group)
                op_arg, check = op_and_check(op, dtype)
                x = inputs[r].clone()
                all_reduce(x, op_arg, group, check_consistency=check)
                expect_reduced_equal(failures, x, expected, inputs, op, what)
                if op == "sum" and n == sizes[-1]:
                    expect_same_on_all_ranks(failures, x, group, what)
    x = torch.arange(15.0, device=device).view(3, 5) * (r + 1)  # (3, 5): flat view
    expected = x.clone()
    dist.all_reduce(expected, group=group)
    all_reduce(x, "sum", group)
    expect(failures, torch.equal(x, expected), f"2-D {name}")


# The rank side of each test file that shares the spawn: "module:function", each
# called as function(groups) on every rank, in this order.
SPAWNED_CHECKS = (
    "tests.comm.test_ring:ring_checks",
    "tests.comm.test_tree:tree_checks",
    "tests.comm.test_doubling:doubling_checks",
    "tests.comm.test_alltoall:all_to_all_checks",
    "tests.comm.test_hierarchical:hierarchical_checks",
    "tests.comm.test_mismatch:mismatch_errors",
)


def _run_spawned_checks() -> dict[str, Any]:
    gs = groups()
    out = {}
    for spec in SPAWNED_CHECKS:
        module, name = spec.split(":")
        out[name] = getattr(importlib.import_module(module), name)(gs)
    return out


def spawned_results() -> list[dict[str, Any]]:
    """Every check of :data:`SPAWNED_CHECKS` on one spawn of 4 gloo ranks (cached).

    Returns:
        Per rank, ``{function name: what it returned}``.
    """
    return shared_results(_run_spawned_checks, 4, timeout=300)
