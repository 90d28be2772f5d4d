"""Tensor-parallel grouped-query attention: heads split across the ranks.

Megatron-LM (Shoeybi et al. 2019, Sec. 3, Fig. 3b) splits self-attention by heads:
the query, key and value projections are column parallel, so rank r computes its
``H/p`` query heads and ``G/p`` key/value heads with no communication, attends over
them alone (heads are independent), and the output projection is row parallel, whose
partial products ``g`` sums. One ``f`` in front of the three projections (Megatron
fuses them into one matrix) all-reduces the input's gradient once. With grouped-query
attention a rank's query heads must find their key/value head on the same rank: query
head ``i`` reads KV head ``i // (H/G)``, so ranks holding ``H/p`` consecutive query
heads need ``G/p`` consecutive KV heads, which requires ``p | G`` (Megatron and vLLM
replicate KV heads when ``G < p``; this implementation refuses it). Sequence
parallelism swaps ``f``/``g`` for all-gather/reduce-scatter along the sequence and
saves only the input's shard
(:class:`~aiinfra.parallel.tensor.ops.SequenceParallelMatmuls`).
"""

from __future__ import annotations

import torch.distributed as dist
from torch import Tensor, nn

from aiinfra.comm.counter import CommCounter
from aiinfra.models.attention.gqa import GroupedQueryAttention, grouped_attention
from aiinfra.parallel.tensor.layers import ColumnParallelLinear, RowParallelLinear
from aiinfra.parallel.tensor.ops import (
    CopyToTensorParallel,
    gather_and_project,
)


def check_heads(n_heads: int, n_kv_heads: int, tp_size: int) -> None:
    """Raise unless ``p`` divides both the query heads and the key/value heads.

    Args:
        n_heads: ``H`` query heads.
        n_kv_heads: ``G`` key/value heads.
        tp_size: ``p``, the tensor-parallel group size.

    Raises:
        ValueError: ``p`` does not divide ``H`` or ``G``.
    """
    for name, value in (("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
        if value % tp_size:
            raise ValueError(
                f"{name} = {value} must be divisible by the tensor-parallel size "
                f"{tp_size}: each rank holds whole heads, and its query heads must "
                "find their key/value heads on the same rank"
            )


class TensorParallelAttention(nn.Module):
    """:class:`~aiinfra.models.attention.gqa.GroupedQueryAttention` split by heads.

    Built from the full layer by :meth:`from_attention` (this rank's rows of
    ``W_q, W_k, W_v``, its columns of ``W_o``), causal, without a KV cache.

    Args:
        wq, wk, wv: column-parallel projections to ``H/p`` and ``G/p`` heads.
        wo: the row-parallel output projection.
        n_heads, n_kv_heads, head_dim: the full layer's ``H``, ``G``, ``d``.
        rope: the layer's rotary embedding (``None`` for learned positions).
        window: the sliding window (0: none).
        sequence_parallel: the input and output are sequence shards.
        seq_dim: the sequence dimension.
    """

    def __init__(
        self,
        wq: ColumnParallelLinear,
        wk: ColumnParallelLinear,
        wv: ColumnParallelLinear,
        wo: RowParallelLinear,
        n_heads: int,
        n_kv_heads: int,
        head_dim: int,
        rope: nn.Module | None = None,
        window: int = 0,
        sequence_parallel: bool = False,
        seq_dim: int = 1,
    ) -> None:
        super().__init__()
        if not (wq.comm is wk.comm is wv.comm is wo.comm):
            raise ValueError("wq, wk, wv and wo must share one CommCounter")
        p = wq.comm.world_size
        check_heads(n_heads, n_kv_heads, p)
        if wo.sequence_parallel != sequence_parallel:
            raise ValueError("wo.sequence_parallel must match the attention's")
        self.wq, self.wk, self.wv, self.wo = wq, wk, wv, wo
        self.comm = wq.comm
        self.local_heads, self.local_kv_heads = n_heads // p, n_kv_heads // p
        self.head_dim, self.rope, self.window = head_dim, rope, window
        self.sequence_parallel, self.seq_dim = sequence_parallel, seq_dim

    @classmethod
    def from_attention(
        cls,
        attn: GroupedQueryAttention,
        group: dist.ProcessGroup | None = None,
        sequence_parallel: bool = False,
        comm: CommCounter | None = None,
    ) -> TensorParallelAttention:
        """This rank's heads of ``attn``.

        Raises:
            ValueError: the group size does not divide ``H`` or ``G``.
        """
        comm = CommCounter(group) if comm is None else comm
        check_heads(attn.n_heads, attn.n_kv_heads, comm.world_size)
        column = [
            ColumnParallelLinear.from_linear(lin, group, comm=comm)
            for lin in (attn.wq, attn.wk, attn.wv)
        ]
        wo = RowParallelLinear.from_linear(
            attn.wo, group, True, sequence_parallel, 1, comm
        )
        return cls(
            *column,
            wo,
            attn.n_heads,
            attn.n_kv_heads,
            attn.head_dim,
            attn.rope,
            attn.window,
            sequence_parallel,
        )

    def forward(self, x: Tensor) -> Tensor:
        """``(B, T, h)`` -> ``(B, T, h)``; sequence shards ``(B, T/p, h)`` under SP."""
        projections = [self.wq, self.wk, self.wv]
        if self.sequence_parallel:  # all-gather; only the shard is saved
            q, k, v = gather_and_project(x, projections, self.comm, self.seq_dim)
        else:
            x = CopyToTensorParallel.apply(x, self.comm)  # f
            q, k, v = (m.forward_local(x) for m in projections)
        B, T, _ = q.shape
        Hp, Gp, D = self.local_heads, self.local_kv_heads, self.head_dim
        q = q.view(B, T, Hp, D).transpose(1, 2)  # (B, H/p, T, d)
        k = k.view(B, T, Gp, D).transpose(1, 2)  # (B, G/p, T, d)
        v = v.view(B, T, Gp, D).transpose(1, 2)  # (B, G/p, T, d)
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        o = grouped_attention(q, k, v, window=self.window)  # (B, H/p, T, d)
        return self.wo(o.transpose(1, 2).reshape(B, T, Hp * D))  # g (or RS): (B,T,h)
