"""Column- and row-parallel linear layers and the tensor-parallel SwiGLU MLP.

Megatron-LM (Shoeybi et al. 2019, Sec. 3, Fig. 3a) splits an MLP ``Y = B(A X)``
so that only one all-reduce runs each way: ``A`` by its output rows (column
parallel: each rank computes its own slice of the hidden features, no
communication), ``B`` by its input columns (row parallel: each rank's partial
product is summed by ``g``, the all-reduce). ``f`` before the first layer
all-reduces the input's gradient backward. Each layer here is built from a full
``nn.Linear`` by :meth:`~ColumnParallelLinear.from_linear`, which keeps rank r's
slice, so a test can compare it with the unsharded layer. With sequence parallelism
(Korthikanti et al. 2022) the MLP's input and output are sharded along the sequence:
an all-gather replaces ``f`` and a reduce-scatter replaces ``g``, and only the
input's shard is saved (backward gathers it again).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from aiinfra.comm.counter import CommCounter
from aiinfra.models.layers import SwiGLU
from aiinfra.parallel.tensor.ops import (
    CopyToTensorParallel,
    GatherFromTensorParallel,
    ReduceFromTensorParallel,
    ReduceScatterToSequenceParallel,
    ScatterToTensorParallel,
    gather_and_project,
    shard_size,
)


def _counter(group: dist.ProcessGroup | None, comm: CommCounter | None) -> CommCounter:
    if comm is None:
        return CommCounter(group)
    if comm.group is not group:
        raise ValueError("comm must count the collectives of the same group")
    return comm


def _init(rows: int, cols: int, fan_in: int) -> Tensor:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the bound of ``nn.Linear``'s weight."""
    bound = fan_in**-0.5
    return torch.empty(rows, cols).uniform_(-bound, bound)


def _slice(t: Tensor, dim: int, rank: int, n: int) -> Tensor:
    """Rank ``rank``'s chunk of ``t`` along ``dim``, detached and contiguous."""
    size = t.shape[dim] // n
    return t.detach().narrow(dim, rank * size, size).clone()


class ColumnParallelLinear(nn.Module):
    """``Y = X A^T + b`` with ``A`` split by output rows over the group.

    Rank r holds rows ``r out/p .. (r+1) out/p - 1`` of ``A`` (and of ``b``) and
    computes those output features; ``f`` on the input all-reduces its gradient.

    Args:
        in_features: input width.
        out_features: full output width; divisible by the group size ``p``.
        group: the tensor-parallel process group (``None``: the world).
        bias: whether the layer adds a bias (split like the rows).
        gather_output: all-gather the output features, so every rank holds ``Y``.
        comm: the counter the collectives go through (a new one if ``None``).

    Raises:
        ValueError: ``out_features`` is not divisible by ``p``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        group: dist.ProcessGroup | None = None,
        bias: bool = True,
        gather_output: bool = False,
        comm: CommCounter | None = None,
    ) -> None:
        super().__init__()
        self.comm = _counter(group, comm)
        local = shard_size("out_features", out_features, self.comm.world_size)
        self.in_features, self.out_features = in_features, out_features
        self.gather_output = gather_output
        self.weight = nn.Parameter(
            _init(local, in_features, in_features)
        )  # (out/p, in)
        self.bias = nn.Parameter(torch.zeros(local)) if bias else None

    @classmethod
    def from_linear(
        cls,
        linear: nn.Linear,
        group: dist.ProcessGroup | None = None,
        gather_output: bool = False,
        comm: CommCounter | None = None,
    ) -> ColumnParallelLinear:
        """This rank's slice of ``linear``: its rows of the weight and the bias."""
        out = cls(
            linear.in_features,
            linear.out_features,
            group,
            linear.bias is not None,
            gather_output,
            comm,
        )
        rank, n = out.comm.rank, out.comm.world_size
        w = linear.weight
        out.weight = nn.Parameter(_slice(w, 0, rank, n))
        if linear.bias is not None:
            out.bias = nn.Parameter(_slice(linear.bias, 0, rank, n))
        return out

    def forward_local(self, x: Tensor) -> Tensor:
        """The local product alone, for an input that already went through ``f``."""
        return F.linear(x, self.weight, self.bias)  # (..., out/p)

    def forward(self, x: Tensor) -> Tensor:
        """``f``, then this rank's ``(..., out/p)``; all ``(..., out)`` if gathered."""
        y = self.forward_local(CopyToTensorParallel.apply(x, self.comm))
        return GatherFromTensorParallel.apply(y, self.comm) if self.gather_output else y


class RowParallelLinear(nn.Module):
    """``Y = X A^T + b`` with ``A`` split by input columns over the group.

    Rank r holds columns ``r in/p .. (r+1) in/p - 1`` of ``A``; the partial products
    are summed by ``g`` (or reduce-scattered along the sequence), and the bias, held
    whole by every rank, is added once, after the reduction.

    Args:
        in_features: full input width; divisible by the group size ``p``.
        out_features: output width.
        group: the tensor-parallel process group (``None``: the world).
        bias: whether the layer adds a bias.
        input_is_parallel: the input holds this rank's features ``(..., in/p)``
            already (else the layer takes its chunk of the full input).
        sequence_parallel: reduce-scatter the output along ``seq_dim`` instead of
            all-reducing it.
        seq_dim: the sequence dimension of the output.
        comm: the counter the collectives go through (a new one if ``None``).

    Raises:
        ValueError: ``in_features`` is not divisible by ``p``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        group: dist.ProcessGroup | None = None,
        bias: bool = True,
        input_is_parallel: bool = True,
        sequence_parallel: bool = False,
        seq_dim: int = 1,
        comm: CommCounter | None = None,
    ) -> None:
        super().__init__()
        self.comm = _counter(group, comm)
        local = shard_size("in_features", in_features, self.comm.world_size)
        self.in_features, self.out_features = in_features, out_features
        self.input_is_parallel = input_is_parallel
        self.sequence_parallel, self.seq_dim = sequence_parallel, seq_dim
        self.weight = nn.Parameter(
            _init(out_features, local, in_features)
        )  # (out, in/p)
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    @classmethod
    def from_linear(
        cls,
        linear: nn.Linear,
        group: dist.ProcessGroup | None = None,
        input_is_parallel: bool = True,
        sequence_parallel: bool = False,
        seq_dim: int = 1,
        comm: CommCounter | None = None,
    ) -> RowParallelLinear:
        """This rank's slice of ``linear``: its columns of the weight, all the bias."""
        out = cls(
            linear.in_features,
            linear.out_features,
            group,
            linear.bias is not None,
            input_is_parallel,
            sequence_parallel,
            seq_dim,
            comm,
        )
        rank, n = out.comm.rank, out.comm.world_size
        out.weight = nn.Parameter(_slice(linear.weight, 1, rank, n))
        if linear.bias is not None:
            out.bias = nn.Parameter(linear.bias.detach().clone())
        return out

    def forward(self, x: Tensor) -> Tensor:
        """``(..., in/p)`` (or ``(..., in)``) -> ``(..., out)``, summed over ranks.

        Under sequence parallelism the output is this rank's sequence shard.
        """
        if not self.input_is_parallel:
            x = ScatterToTensorParallel.apply(x, self.comm)  # (..., in/p)
        partial = F.linear(x, self.weight)  # (..., out), this rank's share of the sum
        if self.sequence_parallel:
            y = ReduceScatterToSequenceParallel.apply(partial, self.comm, self.seq_dim)
        else:
            y = ReduceFromTensorParallel.apply(partial, self.comm)
        return y if self.bias is None else y + self.bias


class TensorParallelSwiGLU(nn.Module):
    """:class:`~aiinfra.models.layers.SwiGLU` split over a tensor-parallel group.

    The gate ``w1`` and the up projection ``w3`` are column parallel and share one
    ``f`` (Megatron fuses them into one matrix), so the input's gradient is
    all-reduced once; the down projection ``w2`` is row parallel. Per forward and
    backward of a ``(b, T, h)`` input that is one all-reduce of ``b T h`` elements
    each way, or, with ``sequence_parallel``, one all-gather and one reduce-scatter
    each way (Korthikanti et al. 2022): the input and the output are then sequence
    shards ``(b, T/p, h)``.

    Args:
        w1, w3: the column-parallel gate and up projections.
        w2: the row-parallel down projection.
        sequence_parallel: whether the input and output are sequence shards.
        seq_dim: the sequence dimension.
    """

    def __init__(
        self,
        w1: ColumnParallelLinear,
        w3: ColumnParallelLinear,
        w2: RowParallelLinear,
        sequence_parallel: bool = False,
        seq_dim: int = 1,
    ) -> None:
        super().__init__()
        if not (w1.comm is w3.comm is w2.comm):
            raise ValueError("w1, w2 and w3 must share one CommCounter")
        if w1.gather_output or w3.gather_output or not w2.input_is_parallel:
            raise ValueError(
                "w1 and w3 must keep their outputs split (gather_output=False) and "
                "w2 must take a split input (input_is_parallel=True)"
            )
        if w2.sequence_parallel != sequence_parallel or w2.seq_dim != seq_dim:
            raise ValueError("w2.sequence_parallel and seq_dim must match the MLP's")
        self.w1, self.w3, self.w2 = w1, w3, w2
        self.comm = w1.comm
        self.sequence_parallel, self.seq_dim = sequence_parallel, seq_dim

    @classmethod
    def from_swiglu(
        cls,
        mlp: SwiGLU,
        group: dist.ProcessGroup | None = None,
        sequence_parallel: bool = False,
        seq_dim: int = 1,
    ) -> TensorParallelSwiGLU:
        """This rank's shard of ``mlp``'s weights.

        Raises:
            ValueError: ``d_ff`` is not divisible by the group size.
        """
        comm = CommCounter(group)
        return cls(
            ColumnParallelLinear.from_linear(mlp.w1, group, comm=comm),
            ColumnParallelLinear.from_linear(mlp.w3, group, comm=comm),
            RowParallelLinear.from_linear(
                mlp.w2, group, True, sequence_parallel, seq_dim, comm
            ),
            sequence_parallel,
            seq_dim,
        )

    def forward(self, x: Tensor) -> Tensor:
        """``(b, T, h)`` -> ``(b, T, h)``; sequence shards ``(b, T/p, h)`` under SP.

        Raises:
            ValueError: the last dimension of ``x`` is not ``h``.
        """
        if x.shape[-1] != self.w1.in_features:
            raise ValueError(
                f"x has last dimension {x.shape[-1]}, the MLP takes "
                f"{self.w1.in_features}"
            )
        if self.sequence_parallel:  # all-gather; only the shard is saved
            a, b = gather_and_project(x, [self.w1, self.w3], self.comm, self.seq_dim)
        else:
            x = CopyToTensorParallel.apply(x, self.comm)
            a, b = self.w1.forward_local(x), self.w3.forward_local(x)
        hidden = F.silu(a) * b
        return self.w2(hidden)  # (b, T, h), or (b, T/p, h) under SP
