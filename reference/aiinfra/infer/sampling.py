"""Turning next-token logits into a token: temperature, top-k, top-p, min-p, penalty.

A language model gives one row of logits per sequence, shape ``(B, V)``. Decoding
picks the next token from ``softmax(logits)``, usually after reshaping it:

* temperature ``T`` divides the logits (``T < 1`` sharpens, ``T > 1`` flattens);
* top-k keeps the ``k`` largest logits (Fan et al. 2018), ties with the ``k``-th
  kept;
* top-p (nucleus, Holtzman et al. 2020) keeps the smallest set of most likely tokens
  whose probability reaches ``p``;
* min-p (Nguyen et al. 2024) keeps tokens whose probability is at least ``min_p``
  times that of the most likely token;
* the repetition penalty of CTRL (Keskar et al. 2019) divides the positive logits of
  tokens already seen by ``penalty`` and multiplies their negative ones.

Every filter sets the logits it removes to ``-inf``, so the processors compose and
:func:`sample` draws from what is left. The rules are those of Hugging Face
``transformers``' logits processors, which the tests compare against; processors run
in ``generate``'s order: penalty, temperature, top-k, top-p, min-p. Library code takes
a :class:`torch.Generator`; it never seeds the global one.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiinfra import checks


def _check_logits(logits: Tensor) -> None:
    """Reject logits that are not a floating ``(B, V)`` tensor."""
    if not isinstance(logits, Tensor):
        raise TypeError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if logits.dim() != 2 or logits.shape[-1] < 1:
        raise ValueError(
            f"logits must have shape (B, V) with V >= 1, got {tuple(logits.shape)}"
        )
    if not logits.is_floating_point():
        raise TypeError(f"logits must be floating point, got {logits.dtype}")


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """Divide the logits by ``temperature``.

    Args:
        logits: shape ``(B, V)``.
        temperature: ``> 0``; for greedy decoding use :func:`greedy` instead.

    Returns:
        ``logits / temperature``, shape ``(B, V)``.

    Raises:
        ValueError: ``temperature`` <= 0, or ``logits`` is not ``(B, V)``.
    """
    _check_logits(logits)
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0 (use greedy() for 0), got {temperature}"
        )
    return logits / temperature


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row (and any tied with the ``k``-th).

    Args:
        logits: shape ``(B, V)``.
        k: tokens to keep, ``>= 1``; a ``k`` above ``V`` keeps all.

    Returns:
        The logits with the others set to ``-inf``.

    Raises:
        ValueError: ``k`` < 1, or ``logits`` is not ``(B, V)``.
    """
    _check_logits(logits)
    checks.positive_int("k", k)
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, top_p: float) -> Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches ``top_p``.

    Sorted from least to most likely, a token is dropped while the probability of it
    and everything less likely is at most ``1 - top_p``; the most likely token always
    stays. Among equal logits the lower index counts as less likely (a stable sort).

    Args:
        logits: shape ``(B, V)``.
        top_p: the nucleus mass, in ``(0, 1]``; 1 keeps every token.

    Returns:
        The logits with the tokens outside the nucleus set to ``-inf``.

    Raises:
        ValueError: ``top_p`` is not in ``(0, 1]``, or ``logits`` is not ``(B, V)``.
    """
    _check_logits(logits)
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    ascending, order = torch.sort(logits, dim=-1, descending=False, stable=True)
    tail_mass = ascending.softmax(dim=-1).cumsum(dim=-1)  # (B, V): mass up to each
    drop_sorted = tail_mass <= 1 - top_p
    drop_sorted[:, -1] = False  # the most likely token is always kept
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def min_p_filter(logits: Tensor, min_p: float) -> Tensor:
    """Keep tokens with probability at least ``min_p`` times the largest probability.

    Args:
        logits: shape ``(B, V)``.
        min_p: the relative threshold, in ``[0, 1]``; 0 keeps every token.

    Returns:
        The logits with the less likely tokens set to ``-inf``.

    Raises:
        ValueError: ``min_p`` is not in ``[0, 1]``, or ``logits`` is not ``(B, V)``.
    """
    _check_logits(logits)
    if not 0 <= min_p <= 1:
        raise ValueError(f"min_p must be in [0, 1], got {min_p}")
    probs = logits.softmax(dim=-1)
    threshold = min_p * probs.amax(dim=-1, keepdim=True)  # (B, 1)
    return logits.masked_fill(probs < threshold, float("-inf"))


def repetition_penalty(logits: Tensor, seen: Tensor, penalty: float) -> Tensor:
    """CTRL's penalty: for every token in ``seen``, shrink its logit toward less likely.

    A positive logit is divided by ``penalty``, a negative one multiplied by it, so
    ``penalty > 1`` makes every seen token less likely whatever the logit's sign.

    Args:
        logits: shape ``(B, V)``.
        seen: token ids already in each sequence, shape ``(B, T)``, values in
            ``[0, V)``; repeats count once.
        penalty: ``> 0``; 1 changes nothing, above 1 discourages repeats.

    Returns:
        The penalised logits, shape ``(B, V)``.

    Raises:
        ValueError: ``penalty`` <= 0, ``seen`` is not ``(B, T)`` with ``B`` that of
            ``logits``, or an id is out of range.
        TypeError: ``seen`` is not an integer tensor.
    """
    _check_logits(logits)
    if not penalty > 0:
        raise ValueError(f"penalty must be > 0, got {penalty}")
    if not isinstance(seen, Tensor) or seen.dtype not in (torch.int32, torch.int64):
        raise TypeError("seen must be an int32/int64 tensor of token ids")
    if seen.dim() != 2 or seen.shape[0] != logits.shape[0]:
        raise ValueError(
            f"seen must have shape (B, T) with B = {logits.shape[0]}, "
            f"got {tuple(seen.shape)}"
        )
    V = logits.shape[-1]
    if seen.numel() and (seen.min() < 0 or seen.max() >= V):
        raise ValueError(
            f"seen ids must be in [0, {V}), got range [{seen.min()}, {seen.max()}]"
        )
    mask = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, seen.long(), True)
    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(mask, penalised, logits)


def greedy(logits: Tensor) -> Tensor:
    """The most likely token of each row (the first on ties), shape ``(B,)``."""
    _check_logits(logits)
    return logits.argmax(dim=-1)


def sample(logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Draw one token per row from ``softmax(logits)``.

    Args:
        logits: shape ``(B, V)``, already processed; ``-inf`` entries are never drawn.
        generator: the random source; ``None`` uses torch's global one.

    Returns:
        Token ids, shape ``(B,)``.

    Raises:
        ValueError: ``logits`` is not ``(B, V)``, or a row is all ``-inf`` or NaN.
    """
    _check_logits(logits)
    if torch.isnan(logits).any() or (logits == float("-inf")).all(dim=-1).any():
        raise ValueError("every row of logits needs a finite entry and no NaN")
    probs = logits.float().softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def next_token(
    logits: Tensor,
    generator: torch.Generator | None = None,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    min_p: float = 0.0,
    penalty: float = 1.0,
    seen: Tensor | None = None,
) -> Tensor:
    """The whole decoding step: process the logits in ``generate``'s order, then draw.

    ``temperature == 0`` means greedy: the penalty still applies, the filters do not
    change the argmax and are skipped.

    Args:
        logits: shape ``(B, V)``.
        generator: the random source for the draw.
        temperature: ``>= 0``; 0 is greedy.
        top_k: tokens to keep, or ``None`` for all.
        top_p: nucleus mass in ``(0, 1]``.
        min_p: relative threshold in ``[0, 1]``.
        penalty: repetition penalty ``> 0``; needs ``seen`` when not 1.
        seen: token ids already generated or in the prompt, shape ``(B, T)``.

    Returns:
        Token ids, shape ``(B,)``.

    Raises:
        ValueError: a setting is out of range (named), or ``penalty != 1`` without
            ``seen``.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if penalty != 1.0:
        if seen is None:
            raise ValueError(
                "penalty != 1 needs seen, the token ids already in each sequence"
            )
        logits = repetition_penalty(logits, seen, penalty)
    if temperature == 0:
        return greedy(logits)
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p < 1.0 or not 0 < top_p <= 1:
        logits = top_p_filter(logits, top_p)
    if min_p > 0.0 or not 0 <= min_p <= 1:
        logits = min_p_filter(logits, min_p)
    return sample(logits, generator)
