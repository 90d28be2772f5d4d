"""A router's decision for one batch, and which of its assignments fit.

:class:`Routing` is what a mixture-of-experts layer's router decides for a batch:
its logits and scores, each token's ``K`` chosen experts and their gate weights, and
which assignments an expert's capacity kept. :func:`capacity_keep` is that capacity
rule: each expert takes at most ``C`` assignments of a batch, first choices before
second choices (GShard, Lepikhin et al. 2020, Algorithm 1; Switch, Sec. 2.2).
The layer (:mod:`aiinfra.models.moe.layer`), its balancing losses
(:mod:`aiinfra.models.moe.balance`) and its grouped computation read it.
Notation: ``T`` tokens, ``E`` routed experts, ``K`` chosen per token, ``C`` the
capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass
class Routing:
    """One batch's routing decision.

    Attributes:
        logits: router logits ``W_r x``, ``(T, E)``, in fp32 or wider.
        scores: softmax or sigmoid of the logits, ``(T, E)`` (unbiased).
        weights: the final gate weights of the chosen experts, ``(T, K)``
            (after ``norm_topk`` and ``routed_scale``; dropped ones included).
        experts: the chosen experts, ``(T, K)`` int64, best (biased) score first.
        kept: ``(T, K)`` bool, False where capacity dropped the assignment.
    """

    logits: Tensor
    scores: Tensor
    weights: Tensor
    experts: Tensor
    kept: Tensor


def capacity_keep(experts: Tensor, n_experts: int, capacity: int | None) -> Tensor:
    """Which assignments fit: each expert keeps its first ``C`` in GShard's order.

    GShard's Algorithm 1 (Lepikhin et al. 2020) fills the experts with every token's
    first choice before any second choice; within one choice rank, earlier tokens
    of the batch go first. Position in an expert's queue is a running count.

    Args:
        experts: chosen experts ``(T, K)``, column ``k`` the ``k``-th choice.
        n_experts: ``E``.
        capacity: ``C`` per expert, or ``None`` (keep everything).

    Returns:
        ``kept``, ``(T, K)`` bool.
    """
    if capacity is None:
        return torch.ones_like(experts, dtype=torch.bool)
    T, K = experts.shape
    order = experts.t().reshape(-1)  # choice-major: all first choices, then ..., (K T,)
    onehot = F.one_hot(order, n_experts)  # (K T, E)
    position = (onehot.cumsum(0) * onehot).sum(-1) - 1  # place in its queue, (K T,)
    return (position < capacity).reshape(K, T).t()  # (T, K)
