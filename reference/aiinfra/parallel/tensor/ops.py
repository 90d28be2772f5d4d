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
a reduce-scatter + all-gather pair of the same volume. In front of column-parallel
matmuls the all-gather is fused with them (:class:`SequenceParallelMatmuls`, what
Megatron-LM's ``LinearWithGradAccumulationAndAsyncCommunication`` does): forward
saves only the sequence shard, and backward all-gathers it again for the weight
gradients, one extra all-gather per such matmul group and step, which is what buys
Korthikanti's ``1/p`` activations. Two helpers without reduction
split and gather the feature dimension (:class:`ScatterToTensorParallel`,
:class:`GatherFromTensorParallel`). Every collective goes through a
:class:`~aiinfra.comm.counter.CommCounter`, which logs its size.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
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


class SequenceParallelMatmuls(torch.autograd.Function):
    """All-gather the sequence shards, then ``x W_i^T`` for each weight ``W_i``.

    Sequence parallelism's ``f`` fused with the column-parallel matmuls it feeds
    (the fused QKV, or a SwiGLU's ``w1`` and ``w3``), as Megatron-LM's
    ``LinearWithGradAccumulationAndAsyncCommunication`` does with
    ``sequence_parallel``: forward saves the shard ``(b, T/p, h)``, not the
    gathered ``(b, T, h)``; backward all-gathers it again for the weight gradients,
    then reduce-scatters the input's gradient. Per call and step: two all-gathers
    and one reduce-scatter of ``b T h``, where saving the gathered input would
    need one all-gather fewer and ``p`` times the bytes.
    """

    @staticmethod
    def forward(
        ctx: Any, x: Tensor, comm: CommCounter, dim: int, *weights: Tensor
    ) -> tuple[Tensor, ...]:
        """``(b, T/p, h)`` shard -> one ``(b, T, out_i/p)`` product per weight."""
        ctx.comm, ctx.dim = comm, dim
        ctx.save_for_backward(x, *weights)  # the shard: 1/p of the gathered input
        full = _gather(x, dim, comm)  # (b, T, h), dropped after forward
        return tuple(F.linear(full, w) for w in weights)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[Tensor | None, ...]:
        """Re-gather the input, reduce-scatter its gradient, the weights' gradients."""
        x, *weights = ctx.saved_tensors
        full = _gather(x, ctx.dim, ctx.comm)  # the extra all-gather: (b, T, h)
        grad_full = sum(g @ w for g, w in zip(grads, weights, strict=True))
        grad_x = _reduce_scatter(grad_full, ctx.dim, ctx.comm)  # (b, T/p, h)
        flat = full.reshape(-1, full.shape[-1])  # (b T, h)
        grad_w = [g.reshape(-1, g.shape[-1]).T @ flat for g in grads]  # (out/p, h)
        return (grad_x, None, None, *grad_w)


def gather_and_project(
    x: Tensor, layers: list[Any], comm: CommCounter, dim: int
) -> list[Tensor]:
    """Sequence-parallel input through column-parallel ``layers`` (shard saved).

    Args:
        x: this rank's sequence shard, ``(b, T/p, h)``.
        layers: column-parallel layers with ``weight`` ``(out/p, h)`` and ``bias``.
        comm: the tensor-parallel group's counter.
        dim: the sequence dimension of ``x``.

    Returns:
        One ``(b, T, out/p)`` output per layer, its bias added.
    """
    outs = SequenceParallelMatmuls.apply(x, comm, dim, *(m.weight for m in layers))
    pairs = zip(outs, layers, strict=True)
    return [y if m.bias is None else y + m.bias for y, m in pairs]


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
