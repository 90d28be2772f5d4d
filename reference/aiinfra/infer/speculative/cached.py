"""Speculative decoding with KV caches: the draft decodes, the target verifies at once.

:func:`~aiinfra.infer.speculative.decoding.speculative_generate` shows the acceptance
rule but runs both models over the whole sequence at every step. Here each model keeps
one KV cache per layer (:meth:`~aiinfra.models.transformer.Transformer.new_caches`). A
round feeds the draft the tokens its cache lacks and then its own ``k`` proposals one at
a time (``k`` small forward passes); the target gets the tokens its cache lacks plus the
``k`` proposals in ONE forward pass, which yields its laws ``p_1..p_{k+1}`` at once.
:func:`~aiinfra.infer.speculative.decoding.verify` keeps ``n - 1`` proposals and adds
one token; the keys and values of the rejected proposals are then dropped by moving each
cache's fill mark back (:func:`rollback`), since a cache is written left to right and
overwrites whatever lies past its length. Invariant between rounds: each cache holds a
prefix of the sequence, never its last token, so every round has a token to feed.
Leviathan et al. 2023 (Algorithm 1) and Chen et al. 2023 (Algorithm 2) describe the
loop; notation: ``T`` prompt tokens, ``k`` drafted tokens per round, ``V`` vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiinfra import checks
from aiinfra.infer.speculative.decoding import SpeculativeResult, _law, verify
from aiinfra.models.attention.gqa import KVCache
from aiinfra.models.transformer import Transformer


def rollback(caches: list[KVCache], length: int) -> None:
    """Forget every cached position from ``length`` on, in every layer's cache.

    Nothing is erased: the next :meth:`~aiinfra.models.attention.gqa.KVCache.update`
    writes from ``length`` on and attention reads only ``[0, length)``.

    Args:
        caches: one cache per layer.
        length: positions to keep, ``0 <= length <=`` each cache's current length.

    Raises:
        ValueError: ``length`` is negative or above a cache's length.
    """
    for i, cache in enumerate(caches):
        if not 0 <= length <= cache.length:
            raise ValueError(
                f"length must be in [0, {cache.length}] (cache {i} holds "
                f"{cache.length} positions), got {length}"
            )
    for cache in caches:
        cache.length = length


def _check(
    target: Transformer,
    draft: Transformer,
    prompt: Tensor,
    max_new_tokens: int,
    k: int,
    temperature: float,
) -> None:
    """Reject bad arguments before any forward pass."""
    for name, model in (("target", target), ("draft", draft)):
        if not isinstance(model, Transformer):
            raise TypeError(f"{name} must be a Transformer (it needs KV caches)")
    if target.config.vocab_size != draft.config.vocab_size:
        raise ValueError(
            f"target and draft must share a vocabulary, got V = "
            f"{target.config.vocab_size} and {draft.config.vocab_size}"
        )
    if not isinstance(prompt, Tensor) or prompt.dtype not in (torch.int32, torch.int64):
        raise TypeError("prompt must be an int32/int64 tensor of token ids")
    if prompt.dim() != 2 or prompt.shape[0] != 1 or prompt.shape[1] < 1:
        raise ValueError(
            f"prompt must have shape (1, T) with T >= 1, got {tuple(prompt.shape)}"
        )
    for name, value in (("max_new_tokens", max_new_tokens), ("k", k)):
        checks.positive_int(name, value)
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    longest = prompt.shape[1] + max_new_tokens - 1 + k  # the target's last input
    for name, model in (("target", target), ("draft", draft)):
        if longest > model.config.max_seq_len:
            raise ValueError(
                f"prompt + max_new_tokens - 1 + k = {longest} exceeds the {name}'s "
                f"max_seq_len {model.config.max_seq_len}"
            )


@torch.no_grad()
def speculative_generate_cached(
    target: Transformer,
    draft: Transformer,
    prompt: Tensor,
    max_new_tokens: int,
    k: int,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> SpeculativeResult:
    """Decode one sequence, the draft proposing ``k`` tokens per target forward pass.

    The laws are computed on the models' device; the draws and the acceptance test
    run on the CPU (where :func:`~aiinfra.infer.speculative.decoding.verify` works,
    and where the number of kept tokens must go anyway to set the caches' lengths).
    The draws come in the same order as in
    :func:`~aiinfra.infer.speculative.decoding.speculative_generate`, so both
    functions give the same tokens from the same ``generator`` up to floating-point
    ties.

    Args:
        target: the model whose law the output follows.
        draft: a cheaper model with the same vocabulary.
        prompt: token ids, shape ``(1, T)``, ``T >= 1``.
        max_new_tokens: tokens to append, ``>= 1``.
        k: drafted tokens per target call, ``>= 1``.
        temperature: ``>= 0``; 0 is greedy (the output is the target's greedy one).
        generator: a CPU generator for the drafts, coins and replacements.

    Returns:
        The tokens (prompt first, shape ``(1, T + max_new_tokens)``, on the CPU) and
        the counts of target calls, drafted and accepted tokens.

    Raises:
        TypeError: a model is not a :class:`~aiinfra.models.transformer.Transformer`,
            or ``prompt`` is not integer.
        ValueError: ``prompt`` is not ``(1, T)``, ``max_new_tokens`` or ``k`` < 1,
            ``temperature`` < 0, the vocabularies differ, or the longest input
            passes a model's ``max_seq_len``.
    """
    _check(target, draft, prompt, max_new_tokens, k, temperature)
    T = prompt.shape[1]
    seq = prompt.long().cpu()  # (1, n): every token emitted so far
    device_t, device_d = target.embed.weight.device, draft.embed.weight.device
    size = T + max_new_tokens + k  # the most positions a cache ever holds
    caches_t, caches_d = target.new_caches(1, size), draft.new_caches(1, size)
    calls = drafted = accepted = 0
    while seq.shape[1] < T + max_new_tokens:
        n0 = seq.shape[1]
        # region draft
        feed, qs, xs = seq[:, caches_d[0].length :], [], []  # what the draft lacks
        for _ in range(k):
            logits = draft(feed.to(device_d), caches_d)[:, -1]  # (1, V)
            q = _law(logits, temperature).cpu()  # (1, V)
            x = torch.multinomial(q, 1, generator=generator)  # (1, 1)
            qs.append(q)
            xs.append(x)
            feed = x
        # endregion
        # region verify
        proposals = torch.cat(xs, dim=1)  # (1, k)
        feed = torch.cat([seq[:, caches_t[0].length :], proposals], dim=1)
        logits = target(feed.to(device_t), caches_t)[:, -(k + 1) :]  # (1, k+1, V)
        p = _law(logits, temperature).cpu()  # (1, k+1, V)
        tokens, n = verify(p, torch.stack(qs, dim=1), proposals, generator)
        n = int(n)
        seq = torch.cat([seq, tokens[:, :n]], dim=1)  # (1, n0 + n)
        # keep the accepted proposals' keys and values, drop the rejected ones;
        # the new last token is cached by neither model yet
        rollback(caches_t, n0 + n - 1)
        rollback(caches_d, min(caches_d[0].length, n0 + n - 1))
        # endregion
        calls, drafted, accepted = calls + 1, drafted + k, accepted + n - 1
    return SpeculativeResult(seq[:, : T + max_new_tokens], calls, drafted, accepted)
