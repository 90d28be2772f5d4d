"""HCCL's Mesh, NHR and NB all-reduce, on torch.distributed's send and receive.

Each is a reduce-scatter followed by an all-gather over the p slices of the vector
(``torch.tensor_split``, so n need not be a multiple of p), as HCCL documents them:

- **Mesh** (inside a server whose NPUs are all linked to each other by HCCS): one
  step of reduce-scatter, in which every rank sends slice j to rank j at once over
  its p - 1 links, then one step of all-gather the same way. HCCL's model prices a
  step at alpha + (n/p) beta, the p - 1 links in parallel; here the p - 1 pairs of
  messages are all posted before any is waited on.
- **NHR** and **NB**: ceil(lg p) steps of :mod:`aiinfra.comm.hccl.schedules`, the
  slices of one step sent as one message (concatenated, then split on arrival).

HCCL's Ring, H-D_R and Pairwise are the book's
:func:`~aiinfra.comm.ring.ring_all_reduce`,
:func:`~aiinfra.comm.doubling.rabenseifner_all_reduce` (MPICH's fold for p not a power
of two, which HCCL's RHD page describes) and
:func:`~aiinfra.comm.alltoall.pairwise_all_to_all`. On gloo these run on CPU
processes: they show the schedules are right, not how fast an NPU runs them.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra.comm._validate import (
    check_same_on_all_ranks,
    check_tensor,
    group_rank_and_size,
    resolve_op,
)
from aiinfra.comm.hccl.schedules import all_gather_steps, reduce_scatter_steps
from aiinfra.comm.primitives import combine_, isendrecv, sendrecv


def _prepare(
    tensor: Tensor, op: object, group: dist.ProcessGroup | None, check: bool
) -> tuple[str, int, int]:
    """Check the arguments on this rank and across ranks; return (op, r, p)."""
    op = resolve_op(op)
    check_tensor(tensor, "tensor")
    r, p = group_rank_and_size(group)
    if check:
        fields = {"tensor.numel()": tensor.numel(), "tensor.dtype": tensor.dtype}
        check_same_on_all_ranks({**fields, "op": op}, group, tensor.device)
    return op, r, p


def mesh_reduce_scatter_chunks(
    chunks: list[Tensor], op: str, group: dist.ProcessGroup | None = None
) -> None:
    """One-shot reduce-scatter: every rank sends chunk j to rank j, all at once.

    On return ``chunks[r]`` holds chunk r reduced over all ranks; the other chunks
    are unchanged. Trusts its caller to have validated the input.
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    # region mesh-reduce-scatter
    got = [torch.empty_like(chunks[r]) for _ in range(p)]  # one buffer per peer
    work = []
    for k in range(1, p):  # post all p - 1 exchanges, then wait: one step
        dst, src = (r + k) % p, (r - k) % p
        work += isendrecv(chunks[dst], dst, got[src], src, group)
    for w in work:
        w.wait()
    for src in range(p):
        if src != r:
            combine_(chunks[r], got[src], op)
    # endregion


def mesh_all_gather_chunks(
    chunks: list[Tensor], group: dist.ProcessGroup | None = None
) -> None:
    """One-shot all-gather: every rank sends its chunk r to all p - 1 others at once."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    work = []
    for k in range(1, p):
        dst, src = (r + k) % p, (r - k) % p
        work += isendrecv(chunks[r], dst, chunks[src], src, group)
    for w in work:
        w.wait()


def mesh_all_reduce(
    tensor: Tensor,
    op: str | dist.ReduceOp = "sum",
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
) -> None:
    """All-reduce ``tensor`` in place with HCCL's Mesh algorithm: two one-shot steps.

    Args:
        tensor: contiguous tensor of any shape and numel >= 1; on return it holds
            the reduction over all ranks of ``group``, identical on each.
        op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or the ``dist.ReduceOp``.
        group: process group; ``None`` means the world.
        check_consistency: first exchange (numel, dtype, op) so that a mismatch
            between ranks raises on every rank instead of hanging.

    Raises:
        TypeError: ``tensor`` is not a tensor or has an unsupported dtype.
        ValueError: an unsupported ``op``; an empty or non-contiguous ``tensor``;
            this rank not in ``group``; numel, dtype or op differing across ranks.
    """
    op, _, p = _prepare(tensor, op, group, check_consistency)
    chunks = list(tensor.view(-1).tensor_split(p))  # p chunks of n // p or + 1
    mesh_reduce_scatter_chunks(chunks, op, group)
    mesh_all_gather_chunks(chunks, group)


def _exchange(
    chunks: list[Tensor],
    send: tuple[int, ...],
    dst: int,
    recv: tuple[int, ...],
    src: int,
    group: dist.ProcessGroup | None,
) -> list[Tensor]:
    """Send chunks ``send`` to ``dst`` as one message; receive chunks ``recv``.

    Returns the received chunks, split out of the one message from ``src``.
    """
    sizes = [chunks[i].numel() for i in recv]
    out = chunks[0].new_empty(sum(sizes))  # (sum of the received chunks' sizes,)
    payload = torch.cat([chunks[i] for i in send]) if send else out[:0]
    sendrecv(payload, dst, out, src, group)
    return list(out.split(sizes))


def nonuniform_reduce_scatter_chunks(
    chunks: list[Tensor], kind: str, op: str, group: dist.ProcessGroup | None = None
) -> None:
    """NHR's or NB's reduce-scatter: ``chunks[r]`` ends reduced over all ranks.

    The other chunks are left holding partial sums. Trusts its caller's validation.
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    # region nonuniform-reduce-scatter
    for x in reduce_scatter_steps(kind, r, p):  # ceil(lg p) steps
        got = _exchange(chunks, x.send, x.dst, x.recv, x.src, group)
        for i, part in zip(x.recv, got, strict=True):
            combine_(chunks[i], part, op)  # add the sender's partial sums
    # endregion


def nonuniform_all_gather_chunks(
    chunks: list[Tensor], kind: str, group: dist.ProcessGroup | None = None
) -> None:
    """NHR's or NB's all-gather: from ``chunks[r]`` final on each rank, to all."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    for x in all_gather_steps(kind, r, p):
        got = _exchange(chunks, x.send, x.dst, x.recv, x.src, group)
        for i, part in zip(x.recv, got, strict=True):
            chunks[i].copy_(part)


def _nonuniform_all_reduce(
    tensor: Tensor,
    kind: str,
    op: object,
    group: dist.ProcessGroup | None,
    check_consistency: bool,
) -> None:
    op, _, p = _prepare(tensor, op, group, check_consistency)
    chunks = list(tensor.view(-1).tensor_split(p))
    nonuniform_reduce_scatter_chunks(chunks, kind, op, group)
    nonuniform_all_gather_chunks(chunks, kind, group)


def nhr_all_reduce(
    tensor: Tensor,
    op: str | dist.ReduceOp = "sum",
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
) -> None:
    """All-reduce ``tensor`` in place with HCCL's NHR (nonuniform hierarchical ring).

    2 ceil(lg p) messages per rank for any p, each rank sending 2 (p - 1)/p n bytes
    in all. Arguments and errors as :func:`mesh_all_reduce`.
    """
    _nonuniform_all_reduce(tensor, "nhr", op, group, check_consistency)


def nb_all_reduce(
    tensor: Tensor,
    op: str | dist.ReduceOp = "sum",
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
) -> None:
    """All-reduce ``tensor`` in place with HCCL's NB (nonuniform Bruck).

    NHR's schedule mirrored (messages go to r + d, not r - d). Arguments and errors
    as :func:`mesh_all_reduce`.
    """
    _nonuniform_all_reduce(tensor, "nb", op, group, check_consistency)
