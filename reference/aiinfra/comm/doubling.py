"""Recursive doubling and Rabenseifner's halving-doubling all-reduce.

Recursive doubling finishes in lg p steps: at step k, rank r exchanges its whole
vector with rank r XOR 2^k and both reduce, so after lg p steps every rank holds the
full result. Time lg p (alpha + n beta + n gamma): few messages, the choice for small
n. Rabenseifner's algorithm keeps the lg p latency but sends only 2((p-1)/p) n: a
reduce-scatter by recursive *halving* (exchange half the current window with the rank
at distance p/2, then a quarter at distance p/4, ...) leaves rank r with chunk r
reduced; an all-gather by recursive *doubling* reverses the steps. Time
2 lg p alpha + 2((p-1)/p) n beta + ((p-1)/p) n gamma. Both need a power of two p'; for
other p they *fold* as MPICH does (Thakur, Rabenseifner & Gropp 2005): with
r' = p - p', the first 2r' ranks pair up, each even one hands its vector to its odd
neighbour and idles, the remaining p' ranks run the algorithm under new ranks
0..p'-1, and each odd rank finally returns the result to its partner.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra.comm._validate import (
    check_same_on_all_ranks,
    check_tensor,
    group_rank_and_size,
    resolve_op,
)
from aiinfra.comm.primitives import combine_, sendrecv

# (a, b) -> chunks a, ..., b - 1 of a rank's vector, as one view
Windows = Callable[[int, int], Tensor]


def _validate(
    tensor: Tensor,
    op: object,
    group: dist.ProcessGroup | None,
    check_consistency: bool,
) -> str:
    """The checks shared by both all-reduces; return the op's name."""
    op = resolve_op(op)
    check_tensor(tensor, "tensor")
    group_rank_and_size(group)
    if check_consistency:
        fields = {"tensor.numel()": tensor.numel(), "tensor.dtype": tensor.dtype}
        check_same_on_all_ranks({**fields, "op": op}, group, tensor.device)
    return op


def power_of_two_split(p: int) -> tuple[int, int]:
    """Return (p', r'): the largest power of two p' <= p and the surplus r' = p - p'."""
    p2 = 1 << (p.bit_length() - 1)
    return p2, p - p2


def new_to_group_rank(new_rank: int, extra: int) -> int:
    """Map a new rank in 0..p'-1 back to its group rank, given r' = ``extra``."""
    return 2 * new_rank + 1 if new_rank < extra else new_rank + extra


def fold_in(x: Tensor, op: str, group: dist.ProcessGroup | None) -> int:
    """Fold p ranks onto p' = 2^floor(lg p): even ranks below 2r' hand x to rank + 1.

    Args:
        x: this rank's contiguous 1-D vector; on an odd rank below 2r' it becomes
            x (op) the partner's x.
        op: reduction name.
        group: process group; ``None`` means the world.

    Returns:
        This rank's new rank in 0..p'-1, or -1 if it idles until :func:`fold_out`.
    """
    # region fold-in
    r, p = dist.get_rank(group), dist.get_world_size(group)
    _, extra = power_of_two_split(p)  # r' = p - p'
    if r >= 2 * extra:  # not paired: renumbered below the pairs
        return r - extra
    if r % 2 == 0:  # hand x to the odd partner and wait
        dist.send(x, group=group, group_dst=r + 1)
        return -1
    recv = torch.empty_like(x)
    dist.recv(recv, group=group, group_src=r - 1)
    combine_(x, recv, op)
    return r // 2
    # endregion


def fold_out(x: Tensor, group: dist.ProcessGroup | None) -> None:
    """Undo :func:`fold_in`: odd ranks below 2r' send the result x to rank - 1."""
    # region fold-out
    r, p = dist.get_rank(group), dist.get_world_size(group)
    _, extra = power_of_two_split(p)  # r' = p - p'
    if r < 2 * extra:
        if r % 2 == 1:
            dist.send(x, group=group, group_dst=r - 1)
        else:
            dist.recv(x, group=group, group_src=r + 1)
    # endregion


def recursive_doubling_all_reduce(
    tensor: Tensor,
    op: str | dist.ReduceOp = "sum",
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
) -> None:
    """All-reduce ``tensor`` in place by recursive doubling, like ``dist.all_reduce``.

    Args:
        tensor: contiguous tensor of any shape and numel >= 1; on return it holds the
            reduction over all ranks of ``group``, identical on each.
        op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or the ``dist.ReduceOp``.
        group: process group of any size p; ``None`` means the world.
        check_consistency: first exchange (numel, dtype, op) so that a mismatch
            between ranks raises on every rank instead of hanging.

    Raises:
        TypeError: ``tensor`` is not a tensor or has an unsupported dtype.
        ValueError: an unsupported ``op``; an empty or non-contiguous ``tensor``;
            this rank not in ``group``; numel, dtype or op differing across ranks.
    """
    op = _validate(tensor, op, group, check_consistency)
    x = tensor.view(-1)  # (n,)
    new_rank = fold_in(x, op, group)
    if new_rank >= 0:
        p2, extra = power_of_two_split(dist.get_world_size(group))
        recv = torch.empty_like(x)
        # region recursive-doubling
        mask = 1
        while mask < p2:  # lg p' steps, distance 1, 2, 4, ...
            peer = new_to_group_rank(new_rank ^ mask, extra)
            sendrecv(x, peer, recv, peer, group)
            combine_(x, recv, op)
            mask <<= 1
        # endregion
    fold_out(x, group)


def _chunk_windows(x: Tensor, p2: int) -> Windows:
    """Cut x into p' chunks as ``tensor_split`` does (uneven if need be)."""
    sizes = [c.numel() for c in x.tensor_split(p2)]
    start = [sum(sizes[:i]) for i in range(p2 + 1)]
    return lambda a, b: x[start[a] : start[b]]


def _halving_reduce_scatter(
    chunks: Windows,
    new_rank: int,
    p2: int,
    extra: int,
    op: str,
    group: dist.ProcessGroup | None,
) -> None:
    """Recursive halving over the p' ranks: leave chunk ``new_rank`` fully reduced."""
    # region halving
    lo, hi = 0, p2  # this rank is responsible for chunks [lo, hi)
    mask = p2 // 2
    while mask >= 1:  # distance p'/2, p'/4, ..., 1
        peer = new_to_group_rank(new_rank ^ mask, extra)
        mid = (lo + hi) // 2
        if new_rank & mask:  # keep the upper half of the window, give the lower
            (lo, hi), give = (mid, hi), (lo, mid)
        else:
            (lo, hi), give = (lo, mid), (mid, hi)
        recv = torch.empty_like(chunks(lo, hi))
        sendrecv(chunks(*give), peer, recv, peer, group)
        combine_(chunks(lo, hi), recv, op)
        mask //= 2
    # endregion


def _doubling_all_gather(
    chunks: Windows,
    new_rank: int,
    p2: int,
    extra: int,
    group: dist.ProcessGroup | None,
) -> None:
    """Recursive doubling over the p' ranks: from chunk ``new_rank`` to all p'."""
    # region doubling
    lo, hi = new_rank, new_rank + 1  # the halving left this window reduced
    mask = 1
    while mask < p2:  # distance 1, 2, ..., p'/2; swap whole windows
        peer = new_to_group_rank(new_rank ^ mask, extra)
        other = (lo - mask, lo) if new_rank & mask else (hi, hi + mask)
        sendrecv(chunks(lo, hi), peer, chunks(*other), peer, group)
        lo, hi = min(lo, other[0]), max(hi, other[1])
        mask <<= 1
    # endregion


def rabenseifner_all_reduce(
    tensor: Tensor,
    op: str | dist.ReduceOp = "sum",
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
) -> None:
    """All-reduce ``tensor`` in place by recursive halving then recursive doubling.

    Args:
        tensor: contiguous tensor of any shape and numel >= 1 (not necessarily a
            multiple of p); on return it holds the reduction over all ranks of
            ``group``, identical on each.
        op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or the ``dist.ReduceOp``.
        group: process group of any size p; ``None`` means the world.
        check_consistency: first exchange (numel, dtype, op) so that a mismatch
            between ranks raises on every rank instead of hanging.

    Raises:
        TypeError: ``tensor`` is not a tensor or has an unsupported dtype.
        ValueError: an unsupported ``op``; an empty or non-contiguous ``tensor``;
            this rank not in ``group``; numel, dtype or op differing across ranks.
    """
    op = _validate(tensor, op, group, check_consistency)
    x = tensor.view(-1)  # (n,)
    # region rabenseifner
    new_rank = fold_in(x, op, group)  # -1: this rank waits for the result
    if new_rank >= 0:  # one of the p' ranks that run the algorithm
        p2, extra = power_of_two_split(dist.get_world_size(group))
        chunks = _chunk_windows(x, p2)
        _halving_reduce_scatter(chunks, new_rank, p2, extra, op, group)
        _doubling_all_gather(chunks, new_rank, p2, extra, group)
    fold_out(x, group)
    # endregion
