"""Where each position of a sharded sequence lives: contiguous and zig-zag layouts.

Context parallelism gives each of ``p`` ranks ``T / p`` positions. Cut the sequence into
``2p`` chunks of ``c = T / 2p``: the contiguous layout gives rank ``r`` chunks ``2r``
and ``2r + 1``; the zig-zag layout gives it chunks ``r`` and ``2p - 1 - r``, one early
and one late, so that under a causal mask every rank has the same number of unmasked
(query, key) pairs. Llama 3 shards its context-parallel ranks this way (Dubey et al.
2024, Sec. 3.3.2); Megatron-LM's context parallelism does too. Ring attention
(:mod:`aiinfra.parallel.context.ring_attention`) computes one block per pair of chunks
and asks :func:`block_kind` what the mask leaves of it. Notation: ``p`` ranks, ``r`` a
rank, ``T`` positions, ``c`` positions per chunk.
"""

from __future__ import annotations

import torch
from torch import Tensor

LAYOUTS = ("zigzag", "contiguous")


def chunk_ids(rank: int, p: int, layout: str = "zigzag") -> tuple[int, int]:
    """The two of the ``2p`` sequence chunks that rank ``rank`` holds, in order.

    Args:
        rank: ``r``, ``0 <= r < p``.
        p: ranks in the ring.
        layout: ``"zigzag"``: chunks ``r`` and ``2p - 1 - r``; ``"contiguous"``:
            chunks ``2r`` and ``2r + 1``, the plain split into ``p`` shards.

    Returns:
        The chunk indices, each in ``[0, 2p)``.

    Raises:
        ValueError: an unknown layout, or a rank outside ``[0, p)``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if not 0 <= rank < p:
        raise ValueError(f"rank must be in [0, p = {p}), got {rank}")
    return (rank, 2 * p - 1 - rank) if layout == "zigzag" else (2 * rank, 2 * rank + 1)


def shard_sequence(x: Tensor, rank: int, p: int, layout: str = "zigzag") -> Tensor:
    """Rank ``rank``'s shard of a full sequence: its two chunks, concatenated.

    Args:
        x: full tensor, shape ``(B, H, T, d)``, ``T`` divisible by ``2p``.
        rank: ``r``.
        p: ranks in the ring.
        layout: as in :func:`chunk_ids`.

    Returns:
        Shape ``(B, H, T / p, d)``.

    Raises:
        ValueError: ``T`` not divisible by ``2p``, or a bad rank or layout.
    """
    if x.dim() != 4 or x.shape[2] % (2 * p):
        raise ValueError(
            f"x must be (B, H, T, d) with T divisible by 2p = {2 * p}, "
            f"got {tuple(x.shape)}"
        )
    chunks = x.chunk(2 * p, dim=2)  # 2p of (B, H, c, d)
    return torch.cat([chunks[i] for i in chunk_ids(rank, p, layout)], dim=2)


def unshard_sequence(shards: list[Tensor], layout: str = "zigzag") -> Tensor:
    """The full sequence from every rank's shard, the inverse of :func:`shard_sequence`.

    Args:
        shards: rank ``r``'s shard at index ``r``, each ``(B, H, T / p, d)``.
        layout: as in :func:`chunk_ids`.

    Returns:
        Shape ``(B, H, T, d)``.
    """
    p = len(shards)
    chunks: list[Tensor | None] = [None] * (2 * p)
    for r, shard in enumerate(shards):
        for i, chunk in zip(
            chunk_ids(r, p, layout), shard.chunk(2, dim=2), strict=True
        ):
            chunks[i] = chunk  # (B, H, c, d)
    return torch.cat(chunks, dim=2)  # (B, H, T, d)


def block_kind(i: int, j: int, causal: bool) -> str:
    """What query chunk ``i`` does with key chunk ``j``: full, diagonal or skip.

    Args:
        i: the query chunk's index among the ``2p`` chunks.
        j: the key chunk's index.
        causal: whether later keys are masked.

    Returns:
        ``"full"`` (no key after any query), ``"diagonal"`` (the same chunk: mask
        within it) or ``"skip"`` (every key after every query).
    """
    if not causal or j < i:
        return "full"
    return "diagonal" if j == i else "skip"
