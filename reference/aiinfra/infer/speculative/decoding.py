"""Speculative decoding: a small draft proposes, the target verifies, the law is kept.

A cheap draft model proposes ``k`` tokens ``x_1..x_k``, each drawn from its
distribution ``q_i``; one forward pass of the target gives its distributions
``p_1..p_{k+1}`` at the same positions. Token ``x_i`` is accepted with probability
``min(1, p_i(x_i) / q_i(x_i))``; at the first rejection a replacement is drawn from
``norm(max(0, p_i - q_i))`` and the rest is discarded; if all ``k`` pass, a bonus
token is drawn from ``p_{k+1}``. Every emitted token then follows the target's law
exactly (Leviathan et al. 2023, Sec. 2.3 and Appendix A.1; Chen et al. 2023).

With ``alpha = sum_x min(p(x), q(x)) = 1 - TV(p, q)`` the chance of accepting one
token, and ``alpha`` the same at every position, a target call emits
``(1 - alpha^(k+1)) / (1 - alpha)`` tokens on average (Leviathan et al. 2023,
Sec. 3.1). Notation: ``B`` rows, ``k`` drafted tokens, ``V`` vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from aiinfra import checks

PROB_ATOL = 1e-4  # how far from 1 a row of probabilities may sum


def check_probabilities(probs: Tensor, name: str) -> None:
    """Reject a tensor whose last dimension is not a probability distribution.

    Raises:
        TypeError: ``probs`` is not a floating tensor.
        ValueError: an entry is negative or NaN, or a row does not sum to 1.
    """
    if not isinstance(probs, Tensor) or not probs.is_floating_point():
        raise TypeError(f"{name} must be a floating torch.Tensor")
    if torch.isnan(probs).any() or (probs < 0).any():
        raise ValueError(
            f"{name} must be non-negative probabilities (found a negative or NaN)"
        )
    err = float((probs.sum(dim=-1) - 1).abs().max()) if probs.numel() else 0.0
    if err > PROB_ATOL:
        raise ValueError(
            f"{name} rows must sum to 1 (within {PROB_ATOL}), off by {err:.3g}"
        )


def acceptance_rate(p: Tensor, q: Tensor) -> Tensor:
    """``alpha = sum_x min(p(x), q(x))``: the chance a draft token from ``q`` is kept.

    Args:
        p: target probabilities, shape ``(..., V)``.
        q: draft probabilities, the same shape.

    Returns:
        ``alpha`` per row, shape ``(...)``.

    Raises:
        ValueError: shapes differ, or a row is not a distribution.
    """
    check_probabilities(p, "p")
    check_probabilities(q, "q")
    if p.shape != q.shape:
        raise ValueError(
            f"p and q must have the same shape, got {tuple(p.shape)}, {tuple(q.shape)}"
        )
    return torch.minimum(p, q).sum(dim=-1)


def expected_tokens_per_call(alpha: float, k: int) -> float:
    """Mean tokens a target call emits: ``(1 - alpha^(k+1)) / (1 - alpha)``.

    The accepted prefix stops at the first rejection, and every call adds one token
    (the replacement or the bonus), so the count is ``1 + min(k, geometric)``.

    Args:
        alpha: the acceptance rate, in ``[0, 1]``; 1 gives ``k + 1``.
        k: drafted tokens per call, ``>= 1``.

    Raises:
        ValueError: ``alpha`` is not in ``[0, 1]`` or ``k`` < 1.
    """
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    checks.positive_int("k", k)
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def residual_distribution(p: Tensor, q: Tensor) -> Tensor:
    """``norm(max(0, p - q))``, the law of the replacement after a rejection.

    Where ``p == q`` no rejection can happen; the row is then ``p`` itself.
    """
    r = (p - q).clamp(min=0)
    mass = r.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, r / mass.clamp(min=torch.finfo(r.dtype).tiny), p)


def verify(
    p: Tensor, q: Tensor, draft: Tensor, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """The acceptance rule on ``B`` independent rows at once.

    Args:
        p: target probabilities at the ``k + 1`` positions, shape ``(B, k+1, V)``.
        q: draft probabilities at the first ``k``, shape ``(B, k, V)``.
        draft: the drafted tokens, ``draft[:, i] ~ q[:, i]``, shape ``(B, k)``.
        generator: the random source of the coins and the last draw, on the
            device of ``p`` (a CUDA generator for CUDA tensors).

    Returns:
        ``(tokens, n)``: ``tokens`` of shape ``(B, k+1)`` holds the ``n[b]`` emitted
        tokens of row ``b`` (the accepted drafts then one token from the residual or,
        if all ``k`` passed, from ``p[:, k]``), padded with ``-1``; ``n`` of shape
        ``(B,)`` is in ``[1, k+1]``.

    Raises:
        ValueError: shapes disagree, ``k`` < 1, a row is not a distribution, or a
            drafted token is out of range or has draft probability 0.
        TypeError: ``draft`` is not an integer tensor.
    """
    check_probabilities(p, "p")
    check_probabilities(q, "q")
    if q.dim() != 3 or q.shape[1] < 1:
        raise ValueError(
            f"q must have shape (B, k, V) with k >= 1, got {tuple(q.shape)}"
        )
    B, k, V = q.shape
    if p.shape != (B, k + 1, V):
        raise ValueError(
            f"p must have shape (B, k+1, V) = {(B, k + 1, V)}, got {tuple(p.shape)}"
        )
    if not isinstance(draft, Tensor) or draft.dtype not in (torch.int32, torch.int64):
        raise TypeError("draft must be an int32/int64 tensor of token ids")
    if draft.shape != (B, k):
        raise ValueError(
            f"draft must have shape (B, k) = {(B, k)}, got {tuple(draft.shape)}"
        )
    if (draft < 0).any() or (draft >= V).any():
        raise ValueError(f"draft tokens must be in [0, {V})")
    draft = draft.long()
    q_x = q.gather(-1, draft[..., None]).squeeze(-1)  # (B, k)
    if (q_x <= 0).any():
        raise ValueError("draft tokens must have positive draft probability q(x)")
    p_x = p[:, :k].gather(-1, draft[..., None]).squeeze(-1)  # (B, k)
    coins = torch.rand(B, k, generator=generator, dtype=p.dtype, device=p.device)
    accepted = coins * q_x < p_x  # u < p/q without dividing: accept iff u q(x) < p(x)
    n_acc = accepted.long().cumprod(dim=-1).sum(dim=-1)  # (B,): accepted prefix length
    q_pad = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)  # (B, k+1, V); q = 0 at k
    rows = torch.arange(B, device=p.device)
    last_law = residual_distribution(p[rows, n_acc], q_pad[rows, n_acc])  # (B, V)
    last = torch.multinomial(last_law, 1, generator=generator).squeeze(-1)  # (B,)
    tokens = torch.full((B, k + 1), -1, dtype=torch.long, device=p.device)
    keep = torch.arange(k, device=p.device)[None] < n_acc[:, None]  # (B, k)
    tokens[:, :k] = torch.where(keep, draft, tokens[:, :k])
    tokens[rows, n_acc] = last
    return tokens, n_acc + 1


@dataclass(frozen=True)
class SpeculativeResult:
    """What :func:`speculative_generate` returns.

    Attributes:
        tokens: the prompt and the new tokens, shape ``(1, T + max_new_tokens)``.
        target_calls: forward passes of the target model.
        drafted: tokens the draft proposed in all.
        accepted: drafted tokens the target kept.
    """

    tokens: Tensor
    target_calls: int
    drafted: int
    accepted: int


def _law(logits: Tensor, temperature: float) -> Tensor:
    """Softmax at ``temperature``; at 0, the one-hot of the argmax (greedy)."""
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(
            logits.dtype
        )
    return (logits.float() / temperature).softmax(dim=-1)


@torch.no_grad()
def speculative_generate(
    target: torch.nn.Module,
    draft: torch.nn.Module,
    prompt: Tensor,
    max_new_tokens: int,
    k: int,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> SpeculativeResult:
    """Decode one sequence with a draft model proposing ``k`` tokens per target call.

    Each round the draft runs ``k`` times, the target once over the sequence plus the
    drafts, and :func:`verify` keeps a prefix and adds one token. Both models see the
    whole sequence each call (no KV cache: this shows the rule, not the speed). At
    ``temperature`` 0 both laws are one-hot, so a draft token is kept exactly when it
    is the target's argmax, and the output equals the target's greedy decode.

    Args:
        target: model mapping ``(1, T)`` token ids to ``(1, T, V)`` logits.
        draft: a (cheaper) model with the same vocabulary.
        prompt: token ids, shape ``(1, T)``, ``T >= 1``.
        max_new_tokens: tokens to append, ``>= 1``.
        k: drafted tokens per target call, ``>= 1``.
        temperature: ``>= 0``; 0 is greedy.
        generator: the random source of the drafts, coins and replacements.

    Raises:
        ValueError: ``prompt`` is not ``(1, T)`` with ``T >= 1``, ``max_new_tokens``
            or ``k`` < 1, ``temperature`` < 0, or the longest input would pass a
            model's ``config.max_seq_len``.
    """
    if prompt.dim() != 2 or prompt.shape[0] != 1 or prompt.shape[1] < 1:
        raise ValueError(
            f"prompt must have shape (1, T) with T >= 1, got {tuple(prompt.shape)}"
        )
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    checks.positive_int("k", k)
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    longest = prompt.shape[1] + max_new_tokens - 1 + k
    for name, model in (("target", target), ("draft", draft)):
        limit = getattr(getattr(model, "config", None), "max_seq_len", None)
        if limit is not None and longest > limit:
            raise ValueError(
                f"prompt + max_new_tokens - 1 + k = {longest} exceeds the {name}'s "
                f"max_seq_len {limit}"
            )
    seq, T = prompt.long(), prompt.shape[1]
    calls = drafted = accepted = 0
    while seq.shape[1] < T + max_new_tokens:
        cur, qs, xs = seq, [], []
        for _ in range(k):
            q = _law(draft(cur)[:, -1], temperature)  # (1, V)
            x = torch.multinomial(q, 1, generator=generator)  # (1, 1); argmax at T = 0
            qs.append(q)
            xs.append(x)
            cur = torch.cat([cur, x], dim=1)
        n0 = seq.shape[1]
        p = _law(target(cur)[:, n0 - 1 :], temperature)  # (1, k+1, V)
        q = torch.stack(qs, dim=1).to(p.dtype)  # (1, k, V)
        tokens, n = verify(p, q, torch.cat(xs, dim=1), generator)
        seq = torch.cat([seq, tokens[:, : int(n)]], dim=1)
        calls, drafted, accepted = calls + 1, drafted + k, accepted + int(n) - 1
    return SpeculativeResult(seq[:, : T + max_new_tokens], calls, drafted, accepted)
