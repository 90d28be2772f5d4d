"""Megatron's conjugate communication operators, as named autograd functions.

Tensor parallelism (Shoeybi et al. 2019, "Megatron-LM", Sec. 3) splits each weight
of a layer across the p ranks of a group (Megatron writes t) and needs only two
operators: ``f`` is the identity forward and an all-reduce backward
(:class:`CopyToTensorParallel`), ``g`` an all-reduce forward and the identity backward
(:class:`ReduceFromTensorParallel`). Sequence parallelism (Korthikanti et al. 2022,
Sec. 4.2.2) keeps the activations between tensor-parallel regions sharded along the
sequence and replaces ``f`` by an all-gather forward / reduce-scatter backward
(:class:`GatherFromSequenceParallel`) and ``g`` by a reduce-scatter forward /
all-gather backward (:class:`ReduceScatterToSequenceParallel`): each all-reduce becomes
a reduce-scatter + all-gather pair of the same volume. Two helpers without reduction
split and gather the feature dimension (:class:`ScatterToTensorParallel`,
:class:`GatherFromTensorParallel`). Every collective goes through a
:class:`~aiinfra.comm.counter.CommCounter`, which logs its size.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from aiinfra.comm.counter import CommCounter


def shard_size(name: str, value: int, tp_size: int, what: str = "") -> int:
    """``value / tp_size``, or a ValueError naming ``name`` if it does not divide.

    Args:
        name: the argument's name, for the message (``"out_features"``).
        value: the size to split.
        tp_size: the tensor-parallel group size ``p``.
        what: the kind of parallelism in the message (``"tensor-parallel"``).

    Returns:
        The size of one rank's shard.

    Raises:
        ValueError: ``value`` is not a positive multiple of ``tp_size``.
    """
    what = what or "tensor-parallel"
    if value < 1 or value % tp_size:
        raise ValueError(
            f"{name} {value} must be divisible by the {what} size {tp_size}"
        )
    return value // tp_size


def _gather(x: Tensor, dim: int, comm: CommCounter) -> Tensor:
    """Concatenate every rank's ``x`` along ``dim`` (one all-gather)."""
    n = comm.world_size
    moved = x.movedim(dim, 0).contiguous()  # (T_local, ...)
    out = moved.new_empty((n * moved.shape[0], *moved.shape[1:]))  # (T, ...)
    comm.all_gather(out, moved)
    return out.movedim(0, dim).contiguous()


def _reduce_scatter(x: Tensor, dim: int, comm: CommCounter) -> Tensor:
    """Sum ``x`` over the ranks; rank r keeps chunk r along ``dim``."""
    n = comm.world_size
    local = shard_size(f"dimension {dim} of length", x.shape[dim], n)
    moved = x.movedim(dim, 0).contiguous()  # (T, ...)
    out = moved.new_empty((local, *moved.shape[1:]))  # (T / p, ...)
    comm.reduce_scatter(out, moved)
    return out.movedim(0, dim).contiguous()


def _split(x: Tensor, dim: int, comm: CommCounter) -> Tensor:
    """This rank's chunk of ``x`` along ``dim`` (no communication)."""
    local = shard_size(f"dimension {dim} of length", x.shape[dim], comm.world_size)
    return x.narrow(dim, comm.rank * local, local).contiguous()


class CopyToTensorParallel(torch.autograd.Function):
    """Megatron's ``f``: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, comm: CommCounter) -> Tensor:
        """Return ``x`` unchanged."""
        ctx.comm = comm
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        """All-reduce the gradient over the group."""
        grad = grad.contiguous().clone()
        ctx.comm.all_reduce(grad)
        return grad, None


class ReduceFromTensorParallel(torch.autograd.Function):
    """Megatron's ``g``: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, comm: CommCounter) -> Tensor:
        """Sum ``x`` over the group (all-reduce)."""
        out = x.contiguous().clone()
        comm.all_reduce(out)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        """Pass the gradient through."""
        return grad, None


class GatherFromSequenceParallel(torch.autograd.Function):
    """``f`` under sequence parallelism: all-gather forward, reduce-scatter backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, comm: CommCounter, dim: int) -> Tensor:
        """All-gather the sequence shards along ``dim``."""
        ctx.comm, ctx.dim = comm, dim
        return _gather(x, dim, comm)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        """Reduce-scatter the gradient along ``dim``."""
        return _reduce_scatter(grad, ctx.dim, ctx.comm), None, None


class ReduceScatterToSequenceParallel(torch.autograd.Function):
    """``g`` under sequence parallelism: reduce-scatter forward, all-gather backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, comm: CommCounter, dim: int) -> Tensor:
        """Sum over the group; keep this rank's shard of ``dim``."""
        ctx.comm, ctx.dim = comm, dim
        return _reduce_scatter(x, dim, comm)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        """All-gather the gradient's shards along ``dim``."""
        return _gather(grad, ctx.dim, ctx.comm), None, None


class ScatterToTensorParallel(torch.autograd.Function):
    """Keep this rank's chunk of the last dimension; all-gather it backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, comm: CommCounter) -> Tensor:
        """Keep this rank's chunk of the last dimension."""
        ctx.comm = comm
        return _split(x, -1, comm)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        """All-gather the gradient's chunks."""
        return _gather(grad, -1, ctx.comm), None


class GatherFromTensorParallel(torch.autograd.Function):
    """All-gather the last dimension; backward keeps this rank's chunk."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, comm: CommCounter) -> Tensor:
        """All-gather the last dimension."""
        ctx.comm = comm
        return _gather(x, -1, comm)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        """Keep this rank's chunk of the gradient."""
        return _split(grad, -1, ctx.comm), None


def split_sequence(x: Tensor, comm: CommCounter, dim: int = 1) -> Tensor:
    """This rank's shard of a full sequence, as sequence parallelism holds it.

    Args:
        x: the full activations, e.g. ``(b, T, h)``.
        comm: the tensor-parallel group's counter (no collective is issued).
        dim: the sequence dimension.

    Returns:
        Chunk ``rank`` of ``x`` along ``dim``: ``(b, T / p, h)``.

    Raises:
        ValueError: ``T`` is not divisible by the group size.
    """
    T = x.shape[dim]
    local = shard_size("sequence length", T, comm.world_size, "sequence-parallel")
    return x.narrow(dim, comm.rank * local, local)
