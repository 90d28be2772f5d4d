"""Split-KV decoding (Flash-Decoding): parallel over the cache, merged exactly.

A decoding step has one query per sequence, so FlashAttention's grid, one program
per query block and head, has only ``B G`` programs when the ``R = H / G`` query
heads of a group are packed as the rows of one block: for one sequence of Llama 3
8B, 8 programs on a GPU of 132 SMs. Flash-Decoding (Dao, Haziza, Massa & Sizov
2023) also splits the cached keys and values into ``n`` chunks: each program
attends over one chunk and writes its normalized partial output and its softmax
state ``(m, l)``, and a second step combines the chunks with the online-softmax
merge (:func:`~aiinfra.models.online_softmax.merge`), weighting each partial
output by ``l_s e^{m_s - m} / l``. The result is exact. Notation: ``B`` batch,
``H`` query heads, ``G`` key/value heads, ``T`` new tokens, ``S`` cached tokens,
``D`` head dimension.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from aiinfra.models.online_softmax import merge


def partial_attention(q: Tensor, k: Tensor, v: Tensor, scale: float) -> tuple:
    """Attention of ``q`` over one chunk of keys: output and softmax state.

    Args:
        q: queries, shape ``(B, G, R T, D)``: a group's query heads as rows.
        k: the chunk's keys, shape ``(B, G, S_s, D)``.
        v: the chunk's values, shape ``(B, G, S_s, D_v)``.
        scale: score scale.

    Returns:
        ``o_s`` normalized over the chunk ``(B, G, R T, D_v)``, its maximum ``m_s``
        and sum ``l_s = sum e^{s - m_s}``, each ``(B, G, R T)``, in fp32.
    """
    s = torch.einsum("bgrd,bgsd->bgrs", q.float(), k.float()) * scale  # (B, G, RT, S_s)
    m_s = s.amax(dim=-1)  # (B, G, RT)
    p = torch.exp(s - m_s.unsqueeze(-1))  # (B, G, RT, S_s)
    l_s = p.sum(dim=-1)  # (B, G, RT)
    o_s = torch.einsum("bgrs,bgse->bgre", p, v.float()) / l_s.unsqueeze(-1)
    return o_s, m_s, l_s


def combine(partials: list[tuple[Tensor, Tensor, Tensor]]) -> Tensor:
    """Merge the chunks' outputs with the online-softmax rule, in any order.

    Args:
        partials: ``(o_s, m_s, l_s)`` per chunk, as :func:`partial_attention`.

    Returns:
        The attention output over all chunks, ``(B, G, R T, D_v)``, fp32.
    """
    o, m_i, l_i = partials[0]
    for o_s, m_s, l_s in partials[1:]:
        m_new, l_new = merge(m_i, l_i, m_s, l_s)  # the state of the union
        w_i = l_i * torch.exp(m_i - m_new)  # weight of what was merged so far
        w_s = l_s * torch.exp(m_s - m_new)  # weight of chunk s, (B, G, R T)
        o = (w_i.unsqueeze(-1) * o + w_s.unsqueeze(-1) * o_s) / l_new.unsqueeze(-1)
        m_i, l_i = m_new, l_new
    return o


def split_kv_attention(
    q: Tensor, k: Tensor, v: Tensor, n_splits: int, scale: float | None = None
) -> Tensor:
    """Decoding attention over the whole cache, computed in ``n_splits`` chunks.

    Every query sees every cached key (a decoding step: the new tokens' keys are
    already in the cache, and no query precedes a key it must not see).

    Args:
        q: queries, shape ``(B, H, T, D)``.
        k: cached keys, shape ``(B, G, S, D)`` with ``G`` dividing ``H``.
        v: cached values, shape ``(B, G, S, D_v)``.
        n_splits: chunks of the cache, ``1 <= n_splits <= S``; chunk sizes differ
            by at most one.
        scale: default ``1 / sqrt(D)``.

    Returns:
        ``softmax(q k^T scale) v``, shape ``(B, H, T, D_v)``, dtype of ``q``.

    Raises:
        ValueError: shapes that do not fit together, or ``n_splits`` out of range.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            "q, k, v must be 4-d: (B, H, T, D), (B, G, S, D), (B, G, S, D_v)"
        )
    B, H, T, D = q.shape
    G, S = k.shape[1], k.shape[2]
    if k.shape[0] != B or k.shape[3] != D or v.shape[:3] != k.shape[:3] or H % G:
        raise ValueError(
            f"shapes do not fit: q {tuple(q.shape)}, k {tuple(k.shape)}, "
            f"v {tuple(v.shape)}; G must divide H and B, S, D must agree"
        )
    if isinstance(n_splits, bool) or not isinstance(n_splits, int):
        raise ValueError(f"n_splits must be an integer, got {n_splits!r}")
    if not 1 <= n_splits <= S:
        raise ValueError(f"n_splits must be in [1, S = {S}], got {n_splits}")
    scale = 1 / math.sqrt(D) if scale is None else scale
    rows = q.reshape(B, G, (H // G) * T, D)  # (B, G, R T, D): a group's heads as rows
    partials = [  # one program per chunk on a GPU, all independent
        partial_attention(rows, k_s, v_s, scale)
        for k_s, v_s in zip(
            k.tensor_split(n_splits, dim=2),
            v.tensor_split(n_splits, dim=2),
            strict=True,
        )
    ]
    o = combine(partials)  # (B, G, R T, D_v)
    return o.reshape(B, H, T, v.shape[-1]).to(q.dtype)  # (B, H, T, D_v)


def splits_to_fill(batch: int, kv_heads: int, sms: int) -> int:
    """Chunks per sequence and KV head that give every SM a program, ceil(SMs / B G).

    Args:
        batch: ``B``, sequences decoded together.
        kv_heads: ``G``; each program packs a group's ``R`` query heads as rows.
        sms: streaming multiprocessors of the GPU.

    Returns:
        The smallest ``n`` with ``B G n >= SMs``.

    Raises:
        ValueError: an argument is not a positive integer.
    """
    for name, value in (("batch", batch), ("kv_heads", kv_heads), ("sms", sms)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return -(-sms // (batch * kv_heads))
