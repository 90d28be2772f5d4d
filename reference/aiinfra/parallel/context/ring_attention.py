"""Ring attention: exact attention over a sequence sharded across the p ranks of a ring.

Each rank holds ``T / p`` positions of ``Q``, ``K`` and ``V`` (Liu, Zaharia & Abbeel
2023). The key/value blocks travel around the ring, one hop per step; after ``p - 1``
hops every query has met every key. A step computes one block of attention with the
models chapter's FlashAttention tiles
(:func:`~aiinfra.models.flash.attention.tiled_forward`), which return the block's output
and log-sum-exp, and the partial results merge with the online-softmax rule
(:func:`~aiinfra.models.flash.split_kv.combine`, the merge of split-KV decoding). The
next block's transfer is posted before the current block is computed, so the link works
while the GPU computes. The backward pass runs the ring again: ``K, V`` travel the same
way with their gradient accumulators ``dK, dV`` one hop behind, and each block's ``P``
is recomputed from the saved log-sum-exp (FlashAttention-2's backward). With a causal
mask the sequence is cut into ``2p`` chunks and rank ``r`` holds chunks ``r`` and ``2p -
1 - r`` (the zig-zag layout), so that every rank does the same work at every step.
Notation: ``p`` ranks, ``r`` a rank, ``B`` batch, ``H`` query heads, ``G`` key/value
heads, ``T`` positions, ``c = T / 2p`` positions per chunk, ``d`` head dim.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra.comm.primitives import isendrecv
from aiinfra.models.flash.attention import tiled_backward, tiled_forward
from aiinfra.models.flash.online_softmax import merge
from aiinfra.models.flash.split_kv import combine
from aiinfra.parallel.context.zigzag import LAYOUTS, block_kind, chunk_ids


def check_ring_inputs(q: Tensor, k: Tensor, v: Tensor, p: int) -> None:
    """Raise ``ValueError`` unless q, k, v are shards ring attention can take.

    Args:
        q: ``(B, H, T / p, d)``.
        k: ``(B, G, T / p, d)``, ``G`` dividing ``H``.
        v: the shape of ``k``.
        p: ranks in the ring.

    Raises:
        ValueError: wrong rank, shapes that do not fit together, an odd shard length
            (two chunks per rank), or differing dtypes.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be 4-d: (B, H, T/p, d), (B, G, T/p, d) twice")
    B, H, T_local, D = q.shape
    if k.shape != v.shape or (k.shape[0], k.shape[2], k.shape[3]) != (B, T_local, D):
        raise ValueError(
            f"k and v must be (B, G, T/p, d) = ({B}, G, {T_local}, {D}), "
            f"got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    if H % k.shape[1]:
        raise ValueError(f"G = {k.shape[1]} key/value heads must divide H = {H}")
    if T_local == 0 or T_local % 2:
        raise ValueError(
            f"the shard length T/p = {T_local} must be even and > 0: each of the "
            f"p = {p} ranks holds 2 of the 2p chunks"
        )
    if not q.is_floating_point() or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share a float dtype: {q.dtype}, {k.dtype}")


def _expand(x: Tensor, H: int) -> Tensor:
    """Repeat each of the ``G`` key/value heads ``H / G`` times: (B, H, c, d)."""
    return x.repeat_interleave(H // x.shape[1], dim=1)


def _merge(a: tuple[Tensor, Tensor] | None, o_b: Tensor, lse_b: Tensor) -> tuple:
    """Merge a block's ``(o, lse)`` into the running one with the online-softmax rule.

    A log-sum-exp is the softmax state ``(m, l) = (lse, 1)``, so the models chapter's
    :func:`merge` gives the union's state and :func:`combine` its output.
    """
    if a is None:
        return o_b, lse_b
    o_a, lse_a = a
    one = torch.ones_like(lse_a)
    m, l_sum = merge(lse_a, one, lse_b, one)  # (B, H, c) each
    o = combine([(o_a, lse_a, one), (o_b, lse_b, one)])  # (B, H, c, d)
    return o, m + torch.log(l_sum)


def ring_forward(
    q: Tensor, k: Tensor, v: Tensor, group: Any, causal: bool, layout: str, log: list
) -> tuple[Tensor, Tensor]:
    """The ring's forward pass on this rank: output and log-sum-exp of its queries.

    Args:
        q: this rank's queries, ``(B, H, T / p, d)``, its two chunks in order.
        k: its keys, ``(B, G, T / p, d)``.
        v: its values, the shape of ``k``.
        group: the ring's process group (``None``: the world).
        causal: mask key positions after the query's.
        layout: as in :func:`chunk_ids`.
        log: ``("forward", bytes)`` is appended for every message sent.

    Returns:
        ``o`` of shape ``(B, H, T / p, d)`` and ``lse`` of shape ``(B, H, T / p)``, in
        the accumulation dtype (fp32, fp64 for fp64 inputs).
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    H, scale = q.shape[1], 1 / math.sqrt(q.shape[-1])
    q_chunks = q.chunk(2, dim=2)  # 2 of (B, H, c, d)
    state: list[tuple[Tensor, Tensor] | None] = [None, None]  # (o, lse) per chunk
    kv = torch.stack([k, v]).contiguous()  # (2, B, G, T/p, d): one message per hop
    # region ring-loop
    for step in range(p):
        src = (r - step) % p  # the rank whose K/V block this is
        if step < p - 1:  # post the next hop first, so it runs while we compute
            kv_next = torch.empty_like(kv)
            work = isendrecv(kv, (r + 1) % p, kv_next, (r - 1) % p, group)
            log.append(("forward", kv.numel() * kv.element_size()))
        k_chunks, v_chunks = kv[0].chunk(2, dim=2), kv[1].chunk(2, dim=2)
        for a, i in enumerate(chunk_ids(r, p, layout)):
            for b, j in enumerate(chunk_ids(src, p, layout)):
                kind = block_kind(i, j, causal)
                if kind == "skip":  # every key of chunk j comes after chunk i
                    continue
                k_j, v_j = _expand(k_chunks[b], H), _expand(v_chunks[b], H)
                c = k_j.shape[2]
                o_ij, lse_ij = tiled_forward(  # one tile: (B, H, c, d), (B, H, c)
                    q_chunks[a], k_j, v_j, kind == "diagonal", scale, c, c
                )
                state[a] = _merge(state[a], o_ij, lse_ij)
        if step < p - 1:
            for w in work:
                w.wait()
            kv = kv_next
    # endregion
    o = torch.cat([s[0] for s in state], dim=2)  # (B, H, T/p, d)
    return o, torch.cat([s[1] for s in state], dim=2)  # (B, H, T/p)


def ring_backward(
    saved: tuple[Tensor, ...],
    do: Tensor,
    group: Any,
    causal: bool,
    layout: str,
    log: list,
) -> tuple[Tensor, Tensor, Tensor]:
    """The ring's backward pass: ``K, V`` travel again, ``dK, dV`` one hop behind.

    The gradient accumulator of the block a rank holds at step ``t`` arrives from the
    previous rank, which added its share at step ``t - 1``; after ``p`` steps one last
    hop brings each rank its own ``dK, dV``. Arguments as :func:`ring_forward`, with
    ``saved = (q, k, v, o, lse)`` and ``do`` the gradient of ``o``.

    Returns:
        ``dq, dk, dv`` in the accumulation dtype, shaped as ``q, k, v``.
    """
    q, k, v, o, lse = saved
    r, p = dist.get_rank(group), dist.get_world_size(group)
    (B, H, _, D), G = q.shape, k.shape[1]
    scale = 1 / math.sqrt(D)
    q_c, o_c, do_c, lse_c = (x.chunk(2, dim=2) for x in (q, o, do, lse))
    dq = [torch.zeros_like(x, dtype=o.dtype) for x in q_c]  # 2 of (B, H, c, d)
    kv = torch.stack([k, v]).contiguous()  # (2, B, G, T/p, d)
    in_flight: list = []  # the dK/dV hop of the previous step
    dkv_in = None  # what the ranks before us added to the block we hold
    for step in range(p):
        src = (r - step) % p
        if step < p - 1:
            kv_next = torch.empty_like(kv)
            work = isendrecv(kv, (r + 1) % p, kv_next, (r - 1) % p, group)
            log.append(("backward", kv.numel() * kv.element_size()))
        dkv = torch.zeros(kv.shape, dtype=o.dtype, device=kv.device)  # this step's
        for a, i in enumerate(chunk_ids(r, p, layout)):
            for b, j in enumerate(chunk_ids(src, p, layout)):
                kind = block_kind(i, j, causal)
                if kind == "skip":
                    continue
                k_j = _expand(kv[0].chunk(2, dim=2)[b], H)  # (B, H, c, d)
                v_j = _expand(kv[1].chunk(2, dim=2)[b], H)
                c = k_j.shape[2]
                diagonal = kind == "diagonal"
                dq_ij, dk_ij, dv_ij = tiled_backward(  # (B, H, c, d) each
                    q_c[a], k_j, v_j, o_c[a], lse_c[a], do_c[a], diagonal, scale, c, c
                )
                dq[a] += dq_ij
                for g, grad in enumerate((dk_ij, dv_ij)):  # sum each group's heads
                    part = grad.view(B, G, H // G, c, D).sum(dim=2)  # (B, G, c, d)
                    dkv[g].chunk(2, dim=2)[b].add_(part)
        for w in in_flight:
            w.wait()
        if dkv_in is not None:
            dkv += dkv_in
        if p > 1:  # pass the accumulator on; after the last step it goes home
            dkv_in = torch.empty_like(dkv)
            in_flight = isendrecv(dkv, (r + 1) % p, dkv_in, (r - 1) % p, group)
            log.append(("backward", dkv.numel() * dkv.element_size()))
        if step < p - 1:
            for w in work:
                w.wait()
            kv = kv_next
    for w in in_flight:
        w.wait()
    dkv = dkv if dkv_in is None else dkv_in  # (2, B, G, T/p, d): this rank's own
    return torch.cat(dq, dim=2), dkv[0], dkv[1]


class RingAttention(torch.autograd.Function):
    """Ring attention (Liu et al. 2023) whose backward runs the ring again.

    Saved for backward: this rank's ``q, k, v, o`` and ``lse``; no other rank's keys.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        group: Any,
        causal: bool,
        layout: str,
        log: list,
    ) -> Tensor:
        """Shapes as :func:`ring_forward`; returns ``o`` in the dtype of ``q``."""
        o, lse = ring_forward(q, k, v, group, causal, layout, log)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.args = (group, causal, layout, log)
        return o.to(q.dtype)

    @staticmethod
    def backward(ctx: Any, do: Tensor) -> tuple[Tensor | None, ...]:
        """Gradients of ``q, k, v`` (none for the options)."""
        q, k, v = ctx.saved_tensors[:3]
        dq, dk, dv = ring_backward(ctx.saved_tensors, do, *ctx.args)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None


def ring_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    group: dist.ProcessGroup | None = None,
    causal: bool = False,
    layout: str = "zigzag",
    log: list | None = None,
) -> Tensor:
    """Exact attention of this rank's queries over the whole sharded sequence.

    Args:
        q: this rank's queries, ``(B, H, T / p, d)``: the chunks that
            :func:`shard_sequence` gives it, on :func:`~aiinfra.distributed.
            rank_device`.
        k: its keys, ``(B, G, T / p, d)``, ``G`` dividing ``H`` (GQA).
        v: its values, the shape of ``k``.
        group: the ring (``None``: the world).
        causal: mask key positions after the query's (positions of the full
            sequence, through the layout).
        layout: ``"zigzag"`` (balanced under a causal mask) or ``"contiguous"``.
        log: if given, ``(phase, bytes)`` is appended for every message this rank
            sends, forward and backward.

    Returns:
        This rank's rows of ``softmax(q k^T / sqrt(d)) v``, ``(B, H, T / p, d)``.

    Raises:
        ValueError: bad shapes or layout (:func:`check_ring_inputs`), before any
            message is sent.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    check_ring_inputs(q, k, v, dist.get_world_size(group))
    log = [] if log is None else log
    return RingAttention.apply(q, k, v, group, causal, layout, log)
