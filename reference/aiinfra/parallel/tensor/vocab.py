"""Vocabulary-parallel embedding and cross-entropy: no rank holds the full logits.

The embedding table and the output head are ``(V, h)`` matrices, and ``V`` is large
(128,256 for Llama 3): Megatron-LM (Shoeybi et al. 2019, Sec. 3) splits both by
vocabulary rows. Rank r holds tokens ``r V/p .. (r+1) V/p - 1``. The embedding looks
up the tokens it holds, writes zeros for the others, and ``g`` (an all-reduce, or a
reduce-scatter along the sequence under sequence parallelism) sums the one non-zero
row per token. The head computes only its ``V/p`` logits per token, and the
cross-entropy is assembled from three all-reduces of one number per token: the
maximum logit (for a stable softmax), the target's logit (held by one rank), and the
sum of the exponentials. The backward pass needs no communication: rank r's gradient
is ``softmax - one_hot`` on its own ``V/p`` columns.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from aiinfra.comm.counter import CommCounter
from aiinfra.parallel.tensor.ops import (
    ReduceFromTensorParallel,
    ReduceScatterToSequenceParallel,
    shard_size,
)


def vocab_range(vocab_size: int, rank: int, tp_size: int) -> tuple[int, int]:
    """The token ids ``[start, end)`` rank ``rank`` holds.

    Raises:
        ValueError: ``tp_size`` does not divide ``vocab_size``.
    """
    local = shard_size("vocab_size", vocab_size, tp_size)
    return rank * local, (rank + 1) * local


class VocabParallelEmbedding(nn.Module):
    """An ``nn.Embedding`` split by vocabulary rows over a tensor-parallel group.

    Args:
        weight: this rank's rows, ``(V/p, h)``.
        vocab_size: the full ``V``.
        comm: the counter of the tensor-parallel group.
        sequence_parallel: return this rank's sequence shard (reduce-scatter).
    """

    def __init__(
        self,
        weight: Tensor,
        vocab_size: int,
        comm: CommCounter,
        sequence_parallel: bool = False,
    ) -> None:
        super().__init__()
        self.start, self.end = vocab_range(vocab_size, comm.rank, comm.world_size)
        if weight.shape[0] != self.end - self.start:
            raise ValueError(
                f"weight has {weight.shape[0]} rows, rank {comm.rank} holds "
                f"{self.end - self.start} of vocab_size {vocab_size}"
            )
        self.weight = nn.Parameter(weight)  # (V/p, h)
        self.vocab_size, self.comm = vocab_size, comm
        self.sequence_parallel = sequence_parallel

    @classmethod
    def from_embedding(
        cls,
        embedding: nn.Embedding,
        group: dist.ProcessGroup | None = None,
        sequence_parallel: bool = False,
        comm: CommCounter | None = None,
    ) -> VocabParallelEmbedding:
        """This rank's rows of ``embedding``.

        Raises:
            ValueError: the group size does not divide the vocabulary.
        """
        comm = CommCounter(group) if comm is None else comm
        V = embedding.num_embeddings
        start, end = vocab_range(V, comm.rank, comm.world_size)
        rows = embedding.weight.detach()[start:end].clone()
        return cls(rows, V, comm, sequence_parallel)

    def forward(self, tokens: Tensor) -> Tensor:
        """Token ids ``(b, T)`` -> ``(b, T, h)`` (``(b, T/p, h)`` under SP).

        Raises:
            ValueError: a token id is outside ``0 .. V - 1``.
        """
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(f"token ids must lie in 0..{self.vocab_size - 1}")
        mine = (tokens >= self.start) & (tokens < self.end)  # (b, T)
        local = (tokens - self.start).clamp(0, self.end - self.start - 1)  # (b, T)
        rows = F.embedding(local, self.weight) * mine.unsqueeze(-1)  # (b, T, h)
        if self.sequence_parallel:
            return ReduceScatterToSequenceParallel.apply(rows, self.comm, 1)
        return ReduceFromTensorParallel.apply(rows, self.comm)  # g


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """Per-token loss from vocabulary shards of the logits (Megatron's three sums)."""

    @staticmethod
    def forward(
        ctx: Any, logits: Tensor, target: Tensor, comm: CommCounter, start: int
    ) -> Tensor:
        V_local = logits.shape[-1]
        m = logits.detach().amax(-1)  # (...,) this shard's maximum
        comm.all_reduce(m, op=dist.ReduceOp.MAX)  # the row's maximum, on every rank
        shifted = logits.detach() - m.unsqueeze(-1)  # (..., V/p), <= 0
        mine = (target >= start) & (target < start + V_local)  # (...,)
        local = (target - start).clamp(0, V_local - 1)  # (...,)
        picked = shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1) * mine  # (...,)
        comm.all_reduce(picked)  # the target's shifted logit, from its one rank
        exp = shifted.exp()  # (..., V/p)
        total = exp.sum(-1)  # (...,)
        comm.all_reduce(total)  # sum of e^(z - m) over the whole vocabulary
        ctx.save_for_backward(exp / total.unsqueeze(-1), local, mine)
        return total.log() - picked  # log sum e^z - z_target, per token

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        softmax, local, mine = ctx.saved_tensors
        g = softmax.clone()  # (..., V/p)
        g.scatter_add_(-1, local.unsqueeze(-1), -mine.unsqueeze(-1).to(g.dtype))
        return g * grad.unsqueeze(-1), None, None, None


def vocab_parallel_cross_entropy(
    logits: Tensor, target: Tensor, comm: CommCounter
) -> Tensor:
    """Cross-entropy per token from this rank's vocabulary shard of the logits.

    Args:
        logits: ``(..., V/p)``, this rank's columns (rank r: tokens ``r V/p ..``).
        target: token ids ``(...)`` over the full vocabulary.
        comm: the tensor-parallel group's counter (three all-reduces of
            ``target.numel()`` elements).

    Returns:
        The loss of each token, shape of ``target``; equal to
        ``F.cross_entropy(full_logits, target, reduction="none")``.

    Raises:
        ValueError: the shapes disagree or a target lies outside the vocabulary.
    """
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} must be target {tuple(target.shape)} plus "
            "a vocabulary dimension"
        )
    V = logits.shape[-1] * comm.world_size
    if target.numel() and (target.min() < 0 or target.max() >= V):
        raise ValueError(f"target ids must lie in 0..{V - 1}")
    start = comm.rank * logits.shape[-1]
    return _VocabParallelCrossEntropy.apply(logits, target, comm, start)
