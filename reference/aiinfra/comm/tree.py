"""Binomial-tree broadcast and reduce: ceil(lg p) rounds from or to one root.

Number the ranks relative to the root, v = (r - root) mod p, so the root is v = 0. In
a binomial tree, rank v's parent is v with its lowest set bit cleared, and its
children are v + 2^k for every 2^k below that bit. Broadcast runs top-down: the root
first sends to v = 2^(ceil(lg p) - 1), then every holder sends half as far, and so on
down to distance 1; the number of holders doubles each round, so ceil(lg p) rounds
reach everyone. Reduce is the mirror image: in round k, ranks whose bit k is set send
their partial result to v - 2^k and drop out, the others add what they receive. Each
costs ceil(lg p)(alpha + n beta) (plus n gamma per round for reduce), the MPICH
algorithm for short messages (Thakur, Rabenseifner & Gropp 2005).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra.comm._validate import (
    check_root,
    check_same_on_all_ranks,
    check_tensor,
    group_rank_and_size,
    resolve_op,
)
from aiinfra.comm.primitives import combine_


def binomial_broadcast(
    tensor: Tensor,
    src: int = 0,
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
) -> None:
    """Copy ``tensor`` from rank ``src`` to every rank, like ``dist.broadcast``.

    Args:
        tensor: contiguous tensor of any shape, numel >= 1; the data on ``src``,
            overwritten with it on every other rank.
        src: the root's rank in ``group``.
        group: process group; ``None`` means the world.
        check_consistency: first exchange (numel, dtype, src) so that a mismatch
            between ranks raises on every rank instead of hanging.

    Raises:
        TypeError: ``tensor`` is not a tensor or has an unsupported dtype.
        ValueError: an empty or non-contiguous ``tensor``; this rank not in
            ``group``; ``src`` outside [0, p); numel, dtype or src differing across
            ranks.
    """
    check_tensor(tensor, "tensor")
    r, p = group_rank_and_size(group)
    check_root(src, "src", p)
    if check_consistency:
        fields = {"tensor.numel()": tensor.numel(), "tensor.dtype": tensor.dtype}
        check_same_on_all_ranks({**fields, "src": src}, group, tensor.device)
    v = (r - src) % p  # rank relative to the root
    # region broadcast
    mask = 1
    while mask < p:  # receive once, from the parent: v minus its lowest set bit
        if v & mask:
            dist.recv(tensor, group=group, group_src=(r - mask) % p)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:  # then send to the children v + mask/2, v + mask/4, ..., v + 1
        if v + mask < p:
            dist.send(tensor, group=group, group_dst=(r + mask) % p)
        mask >>= 1
    # endregion


def binomial_reduce(
    tensor: Tensor,
    dst: int = 0,
    op: str | dist.ReduceOp = "sum",
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
) -> None:
    """Reduce ``tensor`` over all ranks onto rank ``dst``, like ``dist.reduce``.

    Args:
        tensor: contiguous tensor of any shape, numel >= 1; on ``dst`` it is
            overwritten with the reduction over all ranks of ``group``; on the
            other ranks it is left unchanged.
        dst: the root's rank in ``group``.
        op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or the ``dist.ReduceOp``.
        group: process group; ``None`` means the world.
        check_consistency: first exchange (numel, dtype, dst, op) so that a mismatch
            between ranks raises on every rank instead of hanging.

    Raises:
        TypeError: ``tensor`` is not a tensor or has an unsupported dtype.
        ValueError: an unsupported ``op``; an empty or non-contiguous ``tensor``;
            this rank not in ``group``; ``dst`` outside [0, p); numel, dtype, dst or
            op differing across ranks.
    """
    op = resolve_op(op)
    check_tensor(tensor, "tensor")
    r, p = group_rank_and_size(group)
    check_root(dst, "dst", p)
    if check_consistency:
        fields = {"tensor.numel()": tensor.numel(), "tensor.dtype": tensor.dtype}
        check_same_on_all_ranks({**fields, "dst": dst, "op": op}, group, tensor.device)
    v = (r - dst) % p  # rank relative to the root
    acc = tensor if v == 0 else tensor.clone()  # only the root's tensor is written
    recv = torch.empty_like(tensor)
    # region reduce
    mask = 1
    while mask < p:
        if v & mask:  # send the partial result to the parent and drop out
            dist.send(acc, group=group, group_dst=(r - mask) % p)
            break
        if v + mask < p:  # a child at v + mask: add its partial result
            dist.recv(recv, group=group, group_src=(r + mask) % p)
            combine_(acc, recv, op)
        mask <<= 1
    # endregion
