"""Keeping the experts evenly loaded: two losses and one bias.

A router left alone collapses onto a few experts: they get the tokens, so they learn,
so they get more tokens. The Switch Transformer (Fedus et al. 2022, Eq. 4) adds the
load-balancing loss ``alpha E sum_i f_i P_i``, where ``f_i`` is the fraction of
token-assignments routed to expert ``i`` (not differentiable) and ``P_i`` its mean
router probability (differentiable); it is ``alpha`` when the load is even and grows
with imbalance. For ``K > 1`` we divide the counts by ``T K`` so that
``sum_i f_i = 1``, as DeepSeekMoE's expert-level balance loss (Dai et al. 2024) does
with its ``f_i = E / (K T) * count_i`` (the same loss). ST-MoE (Zoph et al. 2022,
Eq. 5) adds the router z-loss ``mean_t (log sum_i exp(x_{t,i}))^2``, which keeps
logits small for numerical stability. DeepSeek-V3 (Sec. 2.1.2) balances without a
loss: a per-expert bias ``b_i``, used only to choose experts, moves by
``-gamma sign(load_i - mean)`` after each step, ``gamma = 0.001`` for its first
14.3T tokens, then 0 (Sec. 4.2); beside the bias it keeps a *complementary
sequence-wise* loss (Sec. 2.1.2), the same ``alpha E sum_i f_i P_i`` over each
sequence alone with a tiny ``alpha = 0.0001``, against one sequence piling onto a few
experts while the batch looks even. Notation: ``T`` tokens, ``E`` experts, ``K``
chosen per token.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiinfra.models.moe.routing import Routing

SWITCH_ALPHA = 1e-2  # Switch Transformer, Sec. 2.2: alpha = 10^-2
Z_LOSS_WEIGHT = 1e-3  # ST-MoE: c_z = 10^-3
BIAS_GAMMA = 1e-3  # DeepSeek-V3: gamma = 0.001 for most of training
BIAS_GAMMA_TOKENS = 14.3e12  # DeepSeek-V3 Sec. 4.2: ... for the first 14.3T, then 0
SEQUENCE_ALPHA = 1e-4  # DeepSeek-V3 Sec. 4.2: the sequence-wise loss's alpha


def expert_load(experts: Tensor, n_experts: int) -> Tensor:
    """Assignments per expert: how many tokens chose each of the ``E`` experts.

    Args:
        experts: chosen experts ``(T, K)`` (or any shape) of int64 indices.
        n_experts: ``E``.

    Returns:
        ``(E,)`` int64 counts, summing to ``T K``.

    Raises:
        ValueError: an index is outside ``0 .. E - 1``.
    """
    if experts.numel() and (experts.min() < 0 or experts.max() >= n_experts):
        raise ValueError(f"experts must lie in 0..{n_experts - 1}")
    return torch.bincount(experts.reshape(-1), minlength=n_experts)  # (E,)


def imbalance(load: Tensor) -> float:
    """``max_i load_i / mean_i load_i``: 1 when even, ``E`` when one expert takes all.

    Args:
        load: ``(E,)`` tokens per expert, not all zero.

    Returns:
        The ratio.

    Raises:
        ValueError: ``load`` is empty or all zero.
    """
    load = load.double()
    if load.numel() == 0 or load.sum() <= 0:
        raise ValueError("load must be a non-empty tensor with a positive sum")
    return float(load.max() / load.mean())


def load_balancing_loss(routing: Routing, alpha: float = SWITCH_ALPHA) -> Tensor:
    """Switch's ``alpha E sum_i f_i P_i``; gradients reach the router through ``P``.

    ``f_i = count_i / (T K)`` counts every chosen assignment (dropped or not);
    ``P_i`` is the mean over tokens of the scores normalised to sum 1 per token
    (the softmax itself; DeepSeek-V3's normalised ``s'`` for a sigmoid router).

    Args:
        routing: a batch's routing (its ``scores`` carry the graph).
        alpha: the loss weight.

    Returns:
        A scalar tensor.

    Raises:
        ValueError: ``alpha`` < 0 or the batch is empty.
    """
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    T, E = routing.scores.shape
    if T == 0:
        raise ValueError("the routing holds no tokens")
    K = routing.experts.shape[1]
    f = expert_load(routing.experts, E).to(routing.scores.dtype) / (T * K)  # (E,)
    p = routing.scores / routing.scores.sum(-1, keepdim=True)  # (T, E)
    P = p.mean(0)  # (E,)
    return alpha * E * (f * P).sum()


def sequence_balance_loss(
    routing: Routing, seq_len: int, alpha: float = SEQUENCE_ALPHA
) -> Tensor:
    """DeepSeek-V3's complementary sequence-wise loss: the balance loss per sequence.

    The batch's ``T`` tokens are ``T / seq_len`` sequences one after the other;
    :func:`load_balancing_loss` of each, averaged over the sequences.

    Args:
        routing: a batch's routing, sequences contiguous.
        seq_len: tokens per sequence; must divide ``T``.
        alpha: the loss weight (``0.0001`` in DeepSeek-V3).

    Returns:
        A scalar tensor.

    Raises:
        ValueError: ``seq_len`` < 1 or does not divide ``T``, or as
            :func:`load_balancing_loss`.
    """
    T = routing.scores.shape[0]
    if not (isinstance(seq_len, int) and seq_len >= 1 and T % seq_len == 0):
        raise ValueError(f"seq_len must be an int >= 1 dividing T = {T}, got {seq_len}")
    losses = [
        load_balancing_loss(
            Routing(*(getattr(routing, f)[s : s + seq_len] for f in _FIELDS)), alpha
        )
        for s in range(0, T, seq_len)
    ]
    return torch.stack(losses).mean()


_FIELDS = ("logits", "scores", "weights", "experts", "kept")  # Routing's, in order


def router_z_loss(logits: Tensor) -> Tensor:
    """ST-MoE's ``mean_t (log sum_i exp(x_{t,i}))^2`` (unweighted; times ``c_z``).

    Args:
        logits: router logits ``(T, E)``.

    Returns:
        A scalar tensor.

    Raises:
        ValueError: ``logits`` is not a non-empty ``(T, E)`` matrix.
    """
    if logits.dim() != 2 or logits.shape[0] == 0:
        raise ValueError(
            f"logits must be (T, E) with T >= 1, got {tuple(logits.shape)}"
        )
    return torch.logsumexp(logits, dim=-1).square().mean()


@torch.no_grad()
def update_expert_bias(bias: Tensor, load: Tensor, gamma: float = BIAS_GAMMA) -> None:
    """DeepSeek-V3's update, in place: ``b_i -= gamma sign(load_i - mean load)``.

    An overloaded expert's bias falls by ``gamma``, an underloaded one's rises; one
    exactly at the mean stays.

    Args:
        bias: ``(E,)`` the biases, changed in place.
        load: ``(E,)`` tokens per expert of the step.
        gamma: the update speed.

    Raises:
        ValueError: shapes differ or ``gamma`` < 0.
    """
    if bias.shape != load.shape or bias.dim() != 1:
        raise ValueError(
            f"bias and load must both be (E,), got {tuple(bias.shape)} and "
            f"{tuple(load.shape)}"
        )
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    load = load.to(torch.float64)
    bias.sub_(gamma * torch.sign(load - load.mean()).to(bias.dtype))
