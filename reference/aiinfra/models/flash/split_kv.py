"""Split-KV decoding (Flash-Decoding): parallel over the cache, merged exactly.

A decoding step has one query per sequence, so FlashAttention's grid, one program per
query block and head, has only ``B G`` programs when the ``H / G`` query heads of a
group are packed as the rows of one block: for one sequence of Llama 3 8B, 8 programs on
a GPU of 132 SMs. Flash-Decoding (Dao, Haziza, Massa & Sizov 2023) also splits the
cached keys and values into ``n_splits`` chunks: each program attends over one chunk and
writes its normalized partial output and its softmax state ``(m, l)``, and a second step
combines the chunks with the online-softmax merge
(:func:`~aiinfra.models.flash.online_softmax.merge`), weighting each partial output by
``l_j e^{m_j - m} / l`` (chunk ``j``). The result is exact. How many chunks is a
question of waves: :func:`wave_efficiency` and :func:`split_step_time` model the
programs running one per SM, and :func:`splits_by_efficiency` is the rule
FlashAttention-2's ``num_splits_heuristic`` applies. Notation: ``B`` batch, ``H`` query
heads, ``G`` key/value heads, ``T`` new tokens, ``T_kv`` cached tokens (the local
``S``), ``d`` head dimension (the local ``D``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from aiinfra import checks
from aiinfra.models.flash.online_softmax import merge

if TYPE_CHECKING:  # drawing needs matplotlib (the docs extra); computing does not
    from matplotlib.figure import Figure

FA2_FULL = 0.8  # num_splits_heuristic: B G programs on 80% of the SMs need no split
FA2_SHARE = 0.85  # ... else the fewest chunks within 85% of the best efficiency


def partial_attention(q: Tensor, k: Tensor, v: Tensor, scale: float) -> tuple:
    """Attention of ``q`` over one chunk of keys: output and softmax state.

    Args:
        q: queries, shape ``(B, G, (H/G) T, d)``: a group's query heads as rows.
        k: the chunk's keys, shape ``(B, G, T_j, d)``.
        v: the chunk's values, shape ``(B, G, T_j, d_v)``.
        scale: score scale.

    Returns:
        ``o_j`` normalized over the chunk ``(B, G, (H/G) T, d_v)``, its maximum
        ``m_j`` and sum ``l_j = sum e^{x - m_j}``, each ``(B, G, (H/G) T)``, in fp32.
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
        The attention output over all chunks, ``(B, G, (H/G) T, d_v)``, fp32.
    """
    o, m_i, l_i = partials[0]
    for o_s, m_s, l_s in partials[1:]:
        m_new, l_new = merge(m_i, l_i, m_s, l_s)  # the state of the union
        w_i = l_i * torch.exp(m_i - m_new)  # weight of what was merged so far
        w_s = l_s * torch.exp(m_s - m_new)  # the chunk's weight, (B, G, (H/G) T)
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
        q: queries, shape ``(B, H, T, d)``.
        k: cached keys, shape ``(B, G, T_kv, d)`` with ``G`` dividing ``H``.
        v: cached values, shape ``(B, G, T_kv, d_v)``.
        n_splits: chunks of the cache, ``1 <= n_splits <= T_kv``; chunk sizes differ
            by at most one.
        scale: default ``1 / sqrt(d)``.

    Returns:
        ``softmax(q k^T scale) v``, shape ``(B, H, T, D_v)``, dtype of ``q``.

    Raises:
        ValueError: shapes that do not fit together, or ``n_splits`` out of range.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            "q, k, v must be 4-d: (B, H, T, d), (B, G, T_kv, d), (B, G, T_kv, d_v)"
        )
    B, H, T, D = q.shape
    G, S = k.shape[1], k.shape[2]
    if k.shape[0] != B or k.shape[3] != D or v.shape[:3] != k.shape[:3] or H % G:
        raise ValueError(
            f"shapes do not fit: q {tuple(q.shape)}, k {tuple(k.shape)}, "
            f"v {tuple(v.shape)}; G must divide H and B, T_kv, d must agree"
        )
    checks.int_in("n_splits", n_splits, 1, S)  # at most T_kv chunks
    scale = 1 / math.sqrt(D) if scale is None else scale
    rows = q.reshape(B, G, (H // G) * T, D)  # (B, G, (H/G) T, d): a group's heads
    partials = [  # one program per chunk on a GPU, all independent
        partial_attention(rows, k_s, v_s, scale)
        for k_s, v_s in zip(
            k.tensor_split(n_splits, dim=2),
            v.tensor_split(n_splits, dim=2),
            strict=True,
        )
    ]
    o = combine(partials)  # (B, G, (H/G) T, d_v)
    return o.reshape(B, H, T, v.shape[-1]).to(q.dtype)  # (B, H, T, D_v)


def splits_to_fill(batch: int, kv_heads: int, sms: int) -> int:
    """Chunks per sequence and KV head that give every SM a program, ceil(SMs / B G).

    Args:
        batch: ``B``, sequences decoded together.
        kv_heads: ``G``; each program packs a group's ``H / G`` query heads as rows.
        sms: streaming multiprocessors of the GPU.

    Returns:
        The smallest ``n_splits`` with ``B G n_splits >= SMs``.

    Raises:
        ValueError: an argument is not a positive integer.
    """
    checks.positive_ints(batch=batch, kv_heads=kv_heads, sms=sms)
    return -(-sms // (batch * kv_heads))


def wave_efficiency(programs: int, sms: int) -> float:
    """Busy share of the SMs when equal programs run one per SM, in waves.

    ``ceil(programs / sms)`` waves, the last one partly idle: the efficiency
    ``programs / (sms ceil(programs / sms))`` by which FlashAttention-2's
    ``num_splits_heuristic`` scores a number of chunks.

    Args:
        programs: ``B G n_splits`` programs of one step.
        sms: streaming multiprocessors of the GPU.

    Returns:
        A share in ``(0, 1]``.

    Raises:
        ValueError: an argument is not a positive integer.
    """
    checks.positive_ints(programs=programs, sms=sms)
    return programs / (sms * -(-programs // sms))


def split_step_time(batch: int, kv_heads: int, sms: int, n_splits: int) -> float:
    """Time of a split-KV step relative to one chunk per sequence, in a wave model.

    A model, not a measurement: a program's time is proportional to its chunk,
    ``T_kv / n_splits``, an SM runs one program at a time and the merge is neglected,
    so the step takes ``ceil(B G n_splits / SMs) / n_splits`` of the unsplit step's
    waves.

    Args:
        batch: ``B``, sequences decoded together.
        kv_heads: ``G``, one program per key/value head and chunk.
        sms: streaming multiprocessors of the GPU.
        n_splits: chunks of each sequence's cache.

    Returns:
        The step's time over that of ``n_splits = 1``.

    Raises:
        ValueError: an argument is not a positive integer.
    """
    checks.positive_ints(batch=batch, kv_heads=kv_heads, sms=sms, n_splits=n_splits)
    waves = -(-batch * kv_heads * n_splits // sms)
    return waves / n_splits / -(-batch * kv_heads // sms)


def splits_by_efficiency(
    batch: int, kv_heads: int, sms: int, max_splits: int = 128
) -> int:
    """Chunks FlashAttention-2's heuristic picks: the fewest within 85% of the best.

    Its ``num_splits_heuristic`` keeps one chunk when ``B G`` programs fill 80% of
    the SMs; otherwise it takes the smallest ``n_splits`` whose :func:`wave_efficiency`
    is at least 0.85 of the best over ``n_splits <= max_splits`` (the kernel also caps
    ``n_splits`` by the cache's key blocks, which this count leaves out).

    Args:
        batch: ``B``, sequences decoded together.
        kv_heads: ``G``.
        sms: streaming multiprocessors of the GPU.
        max_splits: largest ``n`` considered.

    Returns:
        The number of chunks.

    Raises:
        ValueError: an argument is not a positive integer.
    """
    checks.positive_ints(batch=batch, kv_heads=kv_heads, sms=sms, max_splits=max_splits)
    programs = batch * kv_heads
    if programs >= FA2_FULL * sms:
        return 1
    counts = range(1, min(max_splits, sms) + 1)
    eff = {n: wave_efficiency(programs * n, sms) for n in counts}
    return min(n for n in counts if eff[n] >= FA2_SHARE * max(eff.values()))


def split_kv_figure(batch: int, kv_heads: int, sms: int, max_splits: int) -> Figure:
    """Wave efficiency and modelled step time against the number of chunks.

    Args:
        batch: ``B``, sequences decoded together.
        kv_heads: ``G``.
        sms: streaming multiprocessors of the GPU.
        max_splits: largest number of chunks drawn.

    Returns:
        Two panels sharing the chunk axis, with the counts of
        :func:`splits_to_fill` and :func:`splits_by_efficiency` marked.

    Raises:
        ValueError: an argument is not a positive integer.
    """
    from matplotlib.figure import Figure

    checks.positive_ints(batch=batch, kv_heads=kv_heads, sms=sms, max_splits=max_splits)
    counts = list(range(1, max_splits + 1))
    eff = [wave_efficiency(batch * kv_heads * n, sms) for n in counts]
    time = [split_step_time(batch, kv_heads, sms, n) for n in counts]
    fig = Figure(figsize=(6, 4.2), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.step(counts, eff, where="mid")
    top.set_ylabel("busy share of SMs")
    top.set_ylim(0, 1.05)
    bottom.plot(counts, time, ".-")
    bottom.set_yscale("log")
    bottom.set_ylabel("step time / unsplit")
    bottom.set_xlabel("chunks per sequence, n")
    marks = (
        (splits_to_fill(batch, kv_heads, sms), ":", "every SM has a program", 0.08),
        (
            splits_by_efficiency(batch, kv_heads, sms, max_splits),
            "--",
            "FlashAttention's pick",
            0.2,
        ),
    )
    for n, style, label, y in marks:
        for ax in (top, bottom):
            ax.axvline(n, color="gray", linestyle=style, linewidth=0.9)
        top.annotate(label, (n + 0.4, y), fontsize=7)
    for ax in (top, bottom):
        ax.grid(True, which="both", alpha=0.3)
    return fig
