"""A KV cache of fixed budget: a sliding window, and a window with attention sinks.

A cache that keeps every token grows without bound; one of fixed budget ``N`` must
evict. A *sliding window* keeps the ``N`` latest tokens. StreamingLLM (Xiao et al.
2024) keeps the first ``S`` tokens as well (the *attention sinks*, ``S = 4`` in the
paper) and the ``N - S`` latest: language models put much attention on the first
tokens whatever they hold, and evicting them breaks the softmax the model learnt.
StreamingLLM gives positions *within the cache*: the keys are cached before the
rotary embedding, and at every step the ``n`` cached keys are rotated to positions
``0 .. n - 1`` in cache order and the query to ``n - 1`` (Sec. 3.2), so no distance
exceeds what the model saw in training. :func:`streaming_step` decodes one token
per sequence through a model with such caches; notation of
:mod:`~aiinfra.models.attention.gqa` (``B, H, G, d``; ``N`` budget, ``S`` sinks).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from aiinfra import checks
from aiinfra.models.attention.gqa import GroupedQueryAttention
from aiinfra.models.transformer import Transformer


def check_budget(budget: int, sinks: int) -> None:
    """Refuse a cache budget and sink count that cannot work, naming the argument.

    Raises:
        ValueError: ``budget < 1``, ``sinks < 0`` or ``sinks >= budget`` (no room
            left for the latest token).
    """
    checks.positive_int("budget", budget)
    checks.non_negative_int("sinks", sinks)
    if sinks >= budget:
        raise ValueError(
            f"sinks must be < budget (the window needs a slot), got sinks={sinks}, "
            f"budget={budget}"
        )


def kept_tokens(length: int, budget: int, sinks: int) -> list[int]:
    """Indices of the tokens kept among ``length`` seen: the ``S`` first, the latest.

    Raises:
        ValueError: as :func:`check_budget`, or ``length < 0``.
    """
    check_budget(budget, sinks)
    checks.non_negative_int("length", length)
    if length <= budget:
        return list(range(length))
    return list(range(sinks)) + list(range(length - (budget - sinks), length))


class StreamingCache:
    """One layer's keys (not rotated) and values, evicted to ``budget`` tokens.

    Args:
        budget: tokens kept, ``N``.
        sinks: first tokens kept for ever, ``S`` (0: a sliding window).

    Raises:
        ValueError: as :func:`check_budget`.
    """

    def __init__(self, budget: int, sinks: int) -> None:
        check_budget(budget, sinks)
        self.budget, self.sinks = budget, sinks
        self.k: Tensor | None = None  # (B, G, n, d), positions not applied
        self.v: Tensor | None = None  # (B, G, n, d)
        self.tokens: list[int] = []  # the index in the text of each cached slot
        self.seen = 0

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add one token's ``k, v`` ``(B, G, 1, d)``, evict, return the cache."""
        # region evict
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)  # (B,G,n,d)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        self.tokens.append(self.seen)
        self.seen += 1
        if len(self.tokens) > self.budget:  # drop the oldest token after the sinks
            keep = [i for i in range(len(self.tokens)) if i != self.sinks]
            self.k, self.v = self.k[:, :, keep], self.v[:, :, keep]  # (B, G, N, d)
            del self.tokens[self.sinks]
        # endregion
        return self.k, self.v


def _attend(
    attn: GroupedQueryAttention, x: Tensor, cache: StreamingCache
) -> tuple[Tensor, Tensor]:
    """One new token ``x (B, 1, h)`` attends over its layer's streaming cache.

    Returns:
        The attention output ``(B, 1, h)`` and the attention probabilities
        ``(B, H, n)`` over the cache's ``n`` slots.
    """
    B, H, G, D = x.shape[0], attn.n_heads, attn.n_kv_heads, attn.head_dim
    q = attn.wq(x).view(B, 1, H, D).transpose(1, 2)  # (B, H, 1, d)
    k = attn.wk(x).view(B, 1, G, D).transpose(1, 2)  # (B, G, 1, d)
    v = attn.wv(x).view(B, 1, G, D).transpose(1, 2)  # (B, G, 1, d)
    k, v = cache.append(k, v)  # (B, G, n, d): unrotated keys of the kept tokens
    n = k.shape[2]
    # region positions-in-cache
    k = attn.rope(k, 0)  # slot i at position i, whatever its place in the text
    q = attn.rope(q, n - 1)  # the new token is the last slot
    # endregion
    q = q.view(B, G, H // G, 1, D)  # (B, G, H/G, 1, d)
    scores = torch.einsum("bgrtd,bgsd->bgrts", q, k) / math.sqrt(D)  # (B,G,H/G,1,n)
    p = torch.softmax(scores, dim=-1)  # every slot is visible: all are in the past
    o = torch.einsum("bgrts,bgse->bgrte", p, v).reshape(B, H, D)  # (B, H, d)
    return attn.wo(o.reshape(B, 1, H * D)), p.reshape(B, H, n)


@torch.no_grad()
def streaming_step(
    model: Transformer, token: Tensor, caches: list[StreamingCache]
) -> tuple[Tensor, Tensor]:
    """Decode one token per sequence through ``model`` with streaming caches.

    Args:
        model: a RoPE model with grouped-query attention, no sliding window.
        token: the new token ids, shape ``(B, 1)``.
        caches: one :class:`StreamingCache` per layer.

    Returns:
        The next-token logits ``(B, V)`` and, per layer, the attention mass on
        cache slot 0 averaged over the batch and heads, ``(L,)``.

    Raises:
        ValueError: a model without RoPE or with a window, ``token`` not
            ``(B, 1)``, or one cache per layer not given.
    """
    c = model.config
    if c.position != "rope" or c.sliding_window or c.is_mla:
        raise ValueError("model must use RoPE and grouped-query attention, no window")
    if token.dim() != 2 or token.shape[1] != 1:
        raise ValueError(f"token must be (B, 1), got {tuple(token.shape)}")
    if len(caches) != len(model.blocks):
        raise ValueError(
            f"caches must hold {len(model.blocks)} caches, got {len(caches)}"
        )
    x = model.embed(token)  # (B, 1, h)
    mass = []
    for block, cache in zip(model.blocks, caches, strict=True):
        a, p = _attend(block.attn, block.attn_norm(x), cache)
        x = x + a
        x = x + block.mlp(block.mlp_norm(x))  # (B, 1, h)
        mass.append(p[..., 0].mean())
    return model.head(model.norm(x))[:, 0], torch.stack(mass)  # (B, V), (L,)


@torch.no_grad()
def streaming_nll(
    model: Transformer, tokens: Tensor, budget: int, sinks: int
) -> tuple[Tensor, Tensor]:
    """Next-token losses of ``tokens (n, T)`` decoded through streaming caches.

    Returns:
        The negative log-likelihood of tokens ``1 .. T-1``, ``(n, T-1)`` nats, and
        the mass on slot 0 per step and layer, ``(T-1, L)``.

    Raises:
        ValueError: as :func:`check_budget`, or ``tokens`` not ``(n, T >= 2)``.
    """
    check_budget(budget, sinks)
    if tokens.dim() != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be (n, T >= 2), got {tuple(tokens.shape)}")
    caches = [StreamingCache(budget, sinks) for _ in model.blocks]
    nll, mass = [], []
    for t in range(tokens.shape[1] - 1):
        logits, m = streaming_step(model, tokens[:, t : t + 1], caches)  # (n, V)
        nll.append(
            torch.nn.functional.cross_entropy(
                logits, tokens[:, t + 1], reduction="none"
            )
        )
        mass.append(m)
    return torch.stack(nll, dim=1), torch.stack(mass)  # (n, T-1), (T-1, L)
