"""What context parallelism costs: bytes per layer, the overlap of a ring, load balance.

Per attention layer and rank, for a sequence of ``T`` positions on ``p`` ranks and ``w``
bytes per element. Ring attention (:mod:`aiinfra.parallel.context.ring_attention`) sends
its ``K, V`` shard, ``2 B G (T/p) d`` elements, ``p - 1`` times forward and again
backward, where the ``dK, dV`` accumulators (``w_acc`` bytes each) make ``p`` hops.
Ulysses (:mod:`aiinfra.parallel.context.ulysses`) runs four all-to-alls each way, of
``q, k, v`` and ``o``, each sending ``(p - 1)/p`` of its buffer (Jacobs et al. 2023,
Sec. 3.2). A ring step hides its transfer when the block it computes takes longer: with
a causal zig-zag layout a step computes half of a ``(T/p) x (T/p)`` block, ``2 B H
(T/p)^2 d`` FLOPs, against ``alpha + 2 B G (T/p) d w beta`` seconds of transfer, so the
shard length ``s = T/p`` must reach the root of ``(2 B H d / F) s^2 - 2 B G d w beta s
- alpha``, about ``G w F beta / H``. The GPU is the book's H100 at its peak bf16 rate
(:data:`aiinfra.accelerators.GPUS`), the links those of
:data:`aiinfra.parallel.data.overlap.H100_LINKS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiinfra import checks
from aiinfra.parallel.context.zigzag import block_kind, chunk_ids
from aiinfra.parallel.data.overlap import H100_LINKS, Link

BACKWARD_OVER_FORWARD = 2.5  # FlashAttention-2's backward: 5 matmuls against 2


@dataclass(frozen=True)
class AttentionShape:
    """One attention layer's sizes: ``B`` batch, ``H`` and ``G`` heads, ``d``."""

    batch: int
    heads: int
    kv_heads: int
    head_dim: int


def _check_ranks(p: int, seq: int, multiple: int) -> None:
    checks.positive_int("p", p)
    if seq < 1 or seq % (multiple * p):
        raise ValueError(f"seq {seq} must be divisible by {multiple}p = {multiple * p}")


def ring_bytes(
    shape: AttentionShape, seq: int, p: int, elem_bytes: int = 2, acc_bytes: int = 4
) -> dict[str, int]:
    """Bytes one rank of ring attention sends per layer, forward and backward.

    Args:
        shape: the layer.
        seq: ``T``, divisible by ``2p``.
        p: ranks in the ring.
        elem_bytes: ``w``, bytes of a ``K``/``V`` element (2 for bf16).
        acc_bytes: ``w_acc``, bytes of a ``dK``/``dV`` accumulator element.

    Returns:
        ``{"forward": ..., "backward": ...}``.

    Raises:
        ValueError: ``seq`` not divisible by ``2p``.
    """
    _check_ranks(p, seq, 2)
    kv = 2 * shape.batch * shape.kv_heads * (seq // p) * shape.head_dim  # elements
    hops_back = p if p > 1 else 0  # dK, dV: p - 1 hops around, one hop home
    return {
        "forward": (p - 1) * kv * elem_bytes,
        "backward": (p - 1) * kv * elem_bytes + hops_back * kv * acc_bytes,
    }


def kv_repeats(n_heads: int, n_kv_heads: int, p: int) -> int:
    """How many times each K/V head is sent: ``p / G`` when ``p > G``, else 1.

    Args:
        n_heads: ``H`` query heads; ``p`` must divide them.
        n_kv_heads: ``G`` key/value heads; ``p`` must divide them or be a multiple.
        p: ranks in the group.

    Raises:
        ValueError: ``p`` does not divide ``H``, or neither ``p`` nor ``G``
            divides the other.
    """
    if n_heads % p or (n_kv_heads % p and p % n_kv_heads):
        raise ValueError(
            f"Ulysses splits heads across ranks: p = {p} must divide the "
            f"H = {n_heads} query heads, and divide the G = {n_kv_heads} key/value "
            "heads or be a multiple of them (K/V heads repeated p/G times)"
        )
    return max(1, p // n_kv_heads)


def ulysses_bytes(
    shape: AttentionShape, seq: int, p: int, elem_bytes: int = 2
) -> dict[str, int]:
    """Bytes one rank of Ulysses sends per layer: four all-to-alls each way.

    Args:
        shape: the layer; ``p`` must divide ``H``, and divide ``G`` or be a
            multiple of it (K/V heads then repeated ``p / G`` times).
        seq: ``T``, divisible by ``p``.
        p: ranks.
        elem_bytes: ``w``.

    Returns:
        ``{"forward": ..., "backward": ...}``: ``(p-1)/p x 2 (H + G') B (T/p) d w``
        each, ``G' = max(G, p)`` the K/V heads sent.

    Raises:
        ValueError: ``p`` does not divide ``T`` or ``H``, or neither ``p`` nor ``G``
            divides the other.
    """
    _check_ranks(p, seq, 1)
    sent_kv = shape.kv_heads * kv_repeats(shape.heads, shape.kv_heads, p)
    per_shard = shape.batch * (seq // p) * shape.head_dim * elem_bytes
    sent = (p - 1) * 2 * (shape.heads + sent_kv) * per_shard // p
    return {"forward": sent, "backward": sent}


def attention_elements(shape: AttentionShape, seq: int, p: int, method: str) -> int:
    """Elements of attention inputs and outputs a rank holds at the peak.

    Ring: its ``q, o`` (``H`` heads) and ``k, v`` shards, plus the ``K, V`` block
    arriving. Ulysses: the sequence shards of ``q, k, v, o`` and, during attention,
    their head shards as well: twice the tensors.

    Raises:
        ValueError: an unknown method.
    """
    per_head = shape.batch * (seq // p) * shape.head_dim
    H, G = shape.heads, shape.kv_heads
    if method == "ring":
        return (2 * H + 2 * G + 2 * G) * per_head
    if method == "ulysses":
        return 2 * (2 * H + 2 * G) * per_head
    raise ValueError(f"method must be 'ring' or 'ulysses', got {method!r}")


def rank_work(
    p: int, layout: str, causal: bool = True, chunk: int | None = None
) -> list[list[float]]:
    """Unmasked score elements each rank computes at each ring step.

    Counted block by block with the ring's own :func:`block_kind`: a full pair of
    chunks is ``c^2`` elements, a diagonal one ``c (c + 1) / 2``.

    Args:
        p: ranks.
        layout: as in :func:`~aiinfra.parallel.context.ring_attention.chunk_ids`.
        causal: with the causal mask.
        chunk: ``c``, positions per chunk; ``None`` counts in units of ``c^2`` in
            the large-``c`` limit (a diagonal block is ``1/2``).

    Returns:
        ``work[r][t]``: rank ``r``'s work at step ``t``.
    """
    c = 1 if chunk is None else chunk
    diagonal = 0.5 if chunk is None else c * (c + 1) / 2
    size = {"full": float(c * c), "diagonal": diagonal, "skip": 0.0}
    return [
        [
            sum(
                size[block_kind(i, j, causal)]
                for i in chunk_ids(r, p, layout)
                for j in chunk_ids((r - t) % p, p, layout)
            )
            for t in range(p)
        ]
        for r in range(p)
    ]


def ring_efficiency(p: int, layout: str) -> float:
    """Useful work over the time the ring takes when each step waits for its slowest.

    Raises:
        ValueError: an unknown layout (from :func:`chunk_ids`).
    """
    work = rank_work(p, layout)
    slowest = sum(max(work[r][t] for r in range(p)) for t in range(p))
    return sum(map(sum, work)) / (p * slowest)


def step_times(
    shape: AttentionShape,
    shard: int,
    link: Link | str,
    causal: bool = True,
    elem_bytes: int = 2,
) -> tuple[float, float]:
    """Seconds of one forward ring step: block compute and ``K, V`` transfer.

    Args:
        shape: the layer.
        shard: ``s = T/p`` positions per rank.
        link: the GPU and its link, or a key of ``H100_LINKS``.
        causal: zig-zag causal (half a block per step) or full blocks.
        elem_bytes: ``w``.

    Returns:
        ``(compute, transfer)``: ``4 B H s^2 d / F`` (halved if causal) and
        ``alpha + 2 B G s d w / bandwidth``.
    """
    link = H100_LINKS[link] if isinstance(link, str) else link
    flops = 4 * shape.batch * shape.heads * shard**2 * shape.head_dim
    flops = flops / 2 if causal else flops
    kv_bytes = 2 * shape.batch * shape.kv_heads * shard * shape.head_dim * elem_bytes
    return flops / link.flops, link.alpha + kv_bytes / link.bandwidth


def overlap_shard(
    shape: AttentionShape, link: Link | str, causal: bool = True, elem_bytes: int = 2
) -> float:
    """The shard length ``T/p`` from which a step's transfer hides behind its compute.

    Returns:
        The positive root of ``a s^2 - b s - alpha``, with ``a s^2`` the compute and
        ``alpha + b s`` the transfer of :func:`step_times`.
    """
    link = H100_LINKS[link] if isinstance(link, str) else link
    a = step_times(shape, 1, link, causal, elem_bytes)[0]  # compute = a s^2
    b = 2 * shape.batch * shape.kv_heads * shape.head_dim * elem_bytes / link.bandwidth
    return (b + math.sqrt(b * b + 4 * a * link.alpha)) / (2 * a)


def ring_timeline(
    compute: float, transfer: float, p: int
) -> list[tuple[float, float, float, float]]:
    """When each forward step computes and when its next block travels.

    Step ``t`` computes once step ``t - 1`` is done and its block has arrived; the
    transfer of block ``t + 1`` is posted as step ``t`` starts (as
    :func:`~aiinfra.parallel.context.ring_attention.ring_forward` does).

    Returns:
        Per step ``(compute_start, compute_end, transfer_start, transfer_end)``; the
        last step has no transfer (both ends equal its start).
    """
    steps, arrived, done = [], 0.0, 0.0
    for t in range(p):
        start = max(done, arrived)
        done = start + compute
        end = start + transfer if t < p - 1 else start
        steps.append((start, done, start, end))
        arrived = end
    return steps
