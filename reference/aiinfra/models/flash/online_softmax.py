"""Online softmax: the softmax normalizer in a single pass over the scores.

The safe softmax ``y_i = e^{x_i - m} / d`` with ``m = max_j x_j`` and
``d = sum_j e^{x_j - m}`` reads its input three times: once for ``m``, once for
``d``, once for ``y``. Milakov & Gimelshein (2018, Alg. 3) fuse the first two
passes: keep a running maximum and a running sum, and rescale the sum whenever the
maximum grows, ``m_j = max(m_{j-1}, x_j)``,
``d_j = d_{j-1} e^{m_{j-1} - m_j} + e^{x_j - m_j}``. The same rule merges the states
``(m, d)`` of two disjoint blocks of scores, which lets FlashAttention process keys
block by block and ring attention merge the results of different devices. The
state also gives the log-sum-exp ``m + log d`` that FlashAttention saves for its
backward pass. The book writes the running sum ``l``; the paper, and the
argument names here (``d_a``, ``d_b``), write ``d``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

import torch
from torch import Tensor


def merge(m_a: Tensor, d_a: Tensor, m_b: Tensor, d_b: Tensor) -> tuple[Tensor, Tensor]:
    """Combine the softmax states of two disjoint blocks of scores.

    Args:
        m_a: running maximum of block ``a``, any shape.
        d_a: running sum ``sum e^{x - m_a}`` of block ``a``, same shape.
        m_b: maximum of block ``b``.
        d_b: sum of block ``b``.

    Returns:
        ``(m, d)`` of the union: ``m = max(m_a, m_b)``,
        ``d = d_a e^{m_a - m} + d_b e^{m_b - m}``.
    """
    m = torch.maximum(m_a, m_b)
    return m, d_a * torch.exp(m_a - m) + d_b * torch.exp(m_b - m)


def online_states(blocks: Iterable[Tensor]) -> Iterator[tuple[Tensor, Tensor]]:
    """The state ``(m_j, l_j)`` after each block of scores, reading each block once.

    Args:
        blocks: consecutive blocks of the scores along the last dimension, each of
            shape ``(..., b)``; a generator works, since it is iterated once.

    Yields:
        ``(m_j, l_j)``, each of shape ``(...)``: the maximum of the scores read so
        far and ``sum e^{x - m_j}`` over them.
    """
    m = d = None
    for x_j in blocks:
        m_j = x_j.amax(dim=-1)  # (...)
        d_j = torch.exp(x_j - m_j.unsqueeze(-1)).sum(dim=-1)  # (...)
        m, d = (m_j, d_j) if m is None else merge(m, d, m_j, d_j)
        yield m, d


def online_normalizer(blocks: Iterable[Tensor]) -> tuple[Tensor, Tensor]:
    """Maximum and normalizer of the scores: the last state of :func:`online_states`.

    Args:
        blocks: as in :func:`online_states`.

    Returns:
        ``(m, d)``, each of shape ``(...)``: the maximum over all blocks and
        ``sum e^{x - m}``.

    Raises:
        ValueError: ``blocks`` is empty.
    """
    last = deque(online_states(blocks), maxlen=1)  # keeps only the final state
    if not last:
        raise ValueError("blocks is empty: the softmax of nothing is undefined")
    return last[0]


def online_softmax(x: Tensor, block_size: int = 1) -> Tensor:
    """Softmax over the last dimension with the normalizer computed in one pass.

    Args:
        x: scores, shape ``(..., T)``.
        block_size: elements per step; 1 is Milakov & Gimelshein's recurrence.

    Returns:
        ``softmax(x, dim=-1)``, shape ``(..., T)``.

    Raises:
        ValueError: ``block_size`` < 1 or ``x`` has no elements along the last dim.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(
            f"x must have a non-empty last dimension, got {tuple(x.shape)}"
        )
    m, d = online_normalizer(iter(x.split(block_size, dim=-1)))  # (...), (...)
    return torch.exp(x - m.unsqueeze(-1)) / d.unsqueeze(-1)  # (..., N)
