"""A per-token mean loss under data parallelism and gradient accumulation.

A language model's loss is a mean over the tokens of the batch. Data parallelism
averages the ranks' gradients and accumulation divides each micro-batch's loss by k,
so the step's gradient is a mean of per-micro-batch means: equal to the per-token
mean only if every rank and micro-batch holds the same number of tokens. With
padding, packing or variable-length sequences they do not, and a token of a short
micro-batch weighs more than one of a long one. The fix costs one scalar
all-reduce: count the step's tokens over every rank and micro-batch first, then give
each micro-batch the loss ``sum of its token losses / global count``, times N_d
because the wrapper (ours or ``DistributedDataParallel``) still divides by N_d.
Megatron-LM (``calculate_per_token_loss``) and Hugging Face Transformers
(``num_items_in_batch``) normalise the same way. Notation: N_d ranks, k
micro-batches per rank, tau tokens in the step, tau_mb in one micro-batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from aiinfra import checks


def global_token_count(
    local_tokens: int,
    group: dist.ProcessGroup | None = None,
    device: torch.device | str = "cpu",
) -> int:
    """tau: the tokens of this step over every rank of ``group``, one scalar all-reduce.

    Args:
        local_tokens: tokens in all of this rank's micro-batches of the step.
        group: the data-parallel process group (``None``: the world).
        device: where the scalar lives (the backend's device: CUDA for NCCL).

    Returns:
        The sum over ranks, the same on every rank.

    Raises:
        ValueError: ``local_tokens`` is not a non-negative integer (checked before
            the all-reduce), or the step has no token at all (every rank raises).
    """
    checks.non_negative_int("local_tokens", local_tokens)
    # region token-count
    count = torch.tensor([local_tokens], dtype=torch.int64, device=device)  # (1,)
    dist.all_reduce(count, group=group)  # the one scalar all-reduce
    total = int(count.item())
    # endregion
    if total == 0:
        raise ValueError("the step has no tokens on any rank: nothing to average")
    return total


def token_mean_loss(
    loss_sum: torch.Tensor, global_tokens: int, n_ranks: int
) -> torch.Tensor:
    """One micro-batch's loss such that the averaged gradient is the per-token mean.

    Args:
        loss_sum: the sum of this micro-batch's per-token losses (a scalar).
        global_tokens: tau, from :func:`global_token_count`.
        n_ranks: N_d, by which the data-parallel wrapper divides the summed
            gradients (1 for one process).

    Returns:
        ``loss_sum * N_d / tau``; backward through it, on every micro-batch of every
        rank, gives the gradient of the mean over all tau tokens.

    Raises:
        ValueError: ``global_tokens`` or ``n_ranks`` is not a positive integer.
    """
    checks.positive_ints(global_tokens=global_tokens, n_ranks=n_ranks)
    # region token-mean
    # Every rank's wrapper divides the summed gradients by N_d: undo it, then
    # divide by the step's global token count tau instead.
    loss = loss_sum * (n_ranks / global_tokens)
    # endregion
    return loss


def token_weights(counts: Sequence[Sequence[int]]) -> list[list[float]]:
    """How much one token of each micro-batch weighs if means are averaged, vs 1/tau.

    Averaging gives a token of rank r's micro-batch j the weight
    1 / (N_d k tau_mb); the per-token mean gives every token 1 / tau.

    Args:
        counts: ``counts[r][j]``, tokens of micro-batch j on rank r (k per rank).

    Returns:
        ``tau / (N_d k tau_mb)`` per micro-batch: 1 everywhere if the counts are equal.

    Raises:
        ValueError: ranks hold different numbers of micro-batches, or a count is
            not a positive integer.
    """
    if not counts or len({len(row) for row in counts}) != 1 or not counts[0]:
        raise ValueError("counts must be N_d non-empty rows of k micro-batch counts")
    flat = [n for row in counts for n in row]
    checks.int_list("counts", flat)
    n_ranks, k, total = len(counts), len(counts[0]), sum(flat)
    return [[total / (n_ranks * k * n) for n in row] for row in counts]
