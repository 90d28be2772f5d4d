"""DeepSpeed-Ulysses: trade the sequence shard for a head shard, attend, trade back.

Attention mixes positions but not heads. Ulysses (Jacobs et al. 2023) starts where
every rank holds ``T / p`` positions of all ``H`` heads, and an all-to-all gives each
rank all ``T`` positions of ``H / p`` heads; ordinary attention runs on those heads,
and a second all-to-all returns the output to sequence shards. Each all-to-all is a
transpose across ranks (the communication chapter's
:func:`~aiinfra.comm.alltoall.pairwise_all_to_all`) and its gradient is the inverse
all-to-all (:class:`SeqHeadAllToAll`). The hard constraint: ``p`` must divide the ``H``
query heads. With fewer key/value heads than ranks (``p > G``, a multiple of
``G``), each K/V head is repeated ``p / G`` times before the all-to-all so that
every rank receives one (:func:`~aiinfra.parallel.context.cost.kv_repeats`;
DeepSpeed's ALST ``UlyssesSPAttentionHF`` does the same), which multiplies the K/V
bytes sent by ``p / G``. Positions arrive in rank order, so the shards are
contiguous (no zig-zag is needed: every rank computes all positions of its heads).
Notation: ``p`` ranks,
``B`` batch, ``H`` query heads, ``G`` key/value heads, ``T`` positions, ``d`` head dim.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra.comm.alltoall import pairwise_all_to_all
from aiinfra.models.flash.attention import flash_attention
from aiinfra.parallel.context.cost import kv_repeats


def check_ulysses_inputs(q: Tensor, k: Tensor, v: Tensor, p: int) -> None:
    """Raise ``ValueError`` unless q, k, v are sequence shards Ulysses can take.

    Args:
        q: ``(B, H, T / p, d)``.
        k: ``(B, G, T / p, d)``.
        v: the shape of ``k``.
        p: ranks in the group.

    Raises:
        ValueError: wrong rank or shapes, ``p`` not dividing ``H``, neither ``p``
            nor ``G`` dividing the other, ``G`` not dividing ``H``, or differing
            dtypes.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be 4-d: (B, H, T/p, d), (B, G, T/p, d) twice")
    B, H, T_local, D = q.shape
    G = k.shape[1]
    if k.shape != v.shape or (k.shape[0], k.shape[2], k.shape[3]) != (B, T_local, D):
        raise ValueError(
            f"k and v must be (B, G, T/p, d) = ({B}, G, {T_local}, {D}), "
            f"got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    kv_repeats(H, G, p)
    if H % G:
        raise ValueError(f"G = {G} key/value heads must divide H = {H}")
    if not q.is_floating_point() or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share a float dtype: {q.dtype}, {k.dtype}")


def seq_to_heads(x: Tensor, group: Any, log: list, phase: str) -> Tensor:
    """All-to-all from ``(B, n, T/p, d)`` sequence shards to ``(B, n/p, T, d)`` heads.

    Block ``j`` of the send buffer (heads ``j n/p .. (j+1) n/p``) goes to rank ``j``;
    block ``j`` received holds rank ``j``'s positions, so they concatenate in order.
    """
    p = dist.get_world_size(group)
    B, n, T_local, D = x.shape
    send = x.reshape(B, p, n // p, T_local, D).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)  # (p, B, n/p, T/p, d): block j from rank j
    pairwise_all_to_all(recv, send, group, check_consistency=False)
    log.append((phase, send.numel() * send.element_size() * (p - 1) // p))
    return recv.permute(1, 2, 0, 3, 4).reshape(B, n // p, p * T_local, D)  # (B,n/p,T,d)


def heads_to_seq(x: Tensor, group: Any, log: list, phase: str) -> Tensor:
    """The inverse all-to-all: ``(B, n/p, T, d)`` heads to ``(B, n, T/p, d)`` shards."""
    p = dist.get_world_size(group)
    B, n_local, T, D = x.shape
    send = x.reshape(B, n_local, p, T // p, D).permute(2, 0, 1, 3, 4).contiguous()
    recv = torch.empty_like(send)  # (p, B, n/p, T/p, d): block j, heads of rank j
    pairwise_all_to_all(recv, send, group, check_consistency=False)
    log.append((phase, send.numel() * send.element_size() * (p - 1) // p))
    return recv.transpose(0, 1).reshape(B, p * n_local, T // p, D)  # (B, n, T/p, d)


class SeqHeadAllToAll(torch.autograd.Function):
    """Ulysses' all-to-all; its gradient is the all-to-all the other way."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, group: Any, to_heads: bool, log: list) -> Tensor:
        """``to_heads``: sequence shards to head shards; else head to sequence."""
        ctx.args = (group, to_heads, log)
        move = seq_to_heads if to_heads else heads_to_seq
        return move(x, group, log, "forward")

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        """The inverse all-to-all of ``grad``."""
        group, to_heads, log = ctx.args
        move = heads_to_seq if to_heads else seq_to_heads
        return move(grad.contiguous(), group, log, "backward"), None, None, None


def head_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """Full attention on a rank's heads: the models chapter's FlashAttention.

    Args:
        q: ``(B, H/p, T, d)``.
        k: ``(B, G/p, T, d)``; query head ``i`` uses key/value head ``i // (H/G)``.
        v: the shape of ``k``.
        causal: mask later positions.

    Returns:
        ``(B, H/p, T, d)``.
    """
    group_size = q.shape[1] // k.shape[1]  # H / G query heads per key/value head
    k, v = k.repeat_interleave(group_size, 1), v.repeat_interleave(group_size, 1)
    return flash_attention(q, k, v, causal=causal)


def ulysses_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    group: dist.ProcessGroup | None = None,
    causal: bool = False,
    log: list | None = None,
) -> Tensor:
    """Exact attention over a sequence sharded contiguously across ``group``.

    Args:
        q: this rank's queries, positions ``r T/p .. (r+1) T/p``: ``(B, H, T/p, d)``.
        k: its keys, ``(B, G, T/p, d)``.
        v: its values, the shape of ``k``.
        group: the ranks that share the sequence (``None``: the world).
        causal: mask later positions (of the full sequence).
        log: if given, ``(phase, bytes)`` is appended for every all-to-all: the
            bytes this rank sends to the others.

    Returns:
        This rank's rows of the attention output, ``(B, H, T/p, d)``.

    Raises:
        ValueError: see :func:`check_ulysses_inputs`; raised before any all-to-all.
    """
    p = dist.get_world_size(group)
    check_ulysses_inputs(q, k, v, p)
    log = [] if log is None else log
    # region ulysses
    repeats = kv_repeats(q.shape[1], k.shape[1], p)  # p / G when p > G
    if repeats > 1:  # every rank needs a K/V head of its own: (B, p, T/p, d)
        k, v = k.repeat_interleave(repeats, 1), v.repeat_interleave(repeats, 1)
    q_h, k_h, v_h = (SeqHeadAllToAll.apply(x, group, True, log) for x in (q, k, v))
    o_h = head_attention(q_h, k_h, v_h, causal)  # (B, H/p, T, d)
    o = SeqHeadAllToAll.apply(o_h, group, False, log)  # (B, H, T/p, d)
    # endregion
    return o
