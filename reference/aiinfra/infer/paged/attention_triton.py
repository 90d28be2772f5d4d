"""Paged decode attention as a Triton kernel: K/V read block by block through a table.

The kernel computes what :func:`aiinfra.infer.paged.attention.paged_decode_attention`
computes, one decoding step for ``N`` sequences of different lengths, without
gathering each sequence's K/V into a padded tensor first. One program handles one
sequence and one KV head ``g``; it loads the ``H / G`` queries of that group once,
then walks the sequence's block table: it reads the physical block id, loads that
block's ``B_blk`` keys and values of head ``g``, and folds them into an online softmax
(the running maximum ``m_i``, sum ``l_i`` and accumulator ``acc`` of FlashAttention,
Dao et al. 2022). This is vLLM's PagedAttention kernel (Kwon et al. 2023, Sec. 4.1)
with the query heads of a group packed as rows, as FlashInfer does for grouped-query
attention. In pseudo-code::

    q = load(Q[n, group g])                       # (H/G, d)
    for j in range(ceil(T_n / B_blk)):
        blk = load(table[n, j])                   # the indirection
        k, v = load(K[blk, :, g]), load(V[blk, :, g])   # (B_blk, d) each
        s = q @ k.T * scale, masked past T_n     # (H/G, B_blk)
        m_new = max(m_i, rowmax(s)); p = exp(s - m_new)
        l_i = l_i * exp(m_i - m_new) + rowsum(p)
        acc = acc * exp(m_i - m_new) + p @ v
        m_i = m_new
    store(O[n, group g], acc / l_i)

Tiles are cast to fp32 after loading, both products are fp32 ``tl.dot`` (IEEE, not
TF32) and the output is written in fp32 (Triton's interpreter rounds bf16 stores
wrongly); PyTorch rounds it to the query's dtype. Block size, head size and group
need not be powers of two: the tiles are padded to powers of two >= 16 (``tl.dot``'s
minimum) and masked.
Importing this module works without Triton; calling the kernel does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from aiinfra.infer.paged.attention import PagedKVCache
from aiinfra.triton_support import import_triton

triton, tl, jit, HAS_TRITON = import_triton()


@jit
def _paged_decode(
    Q,  # pointer to queries, (N, H, d) contiguous
    K,  # pointer to the key cache, (N_blk, B_blk, G, d) contiguous
    V,  # pointer to the value cache, same layout
    Tables,  # pointer to the block tables, (N, max_blocks) int32, padded
    Lens,  # pointer to the context lengths T_n, (N,) int32
    Out,  # pointer to the output, (N, H, d) fp32
    qk_scale,  # 1 / sqrt(d) times log2(e), so that exp2 gives exp
    max_blocks,  # row stride of Tables
    NUM_KV_HEADS: tl.constexpr,  # G
    GROUP: tl.constexpr,  # H / G query heads per KV head
    HEAD_DIM: tl.constexpr,  # d
    BLOCK_SIZE: tl.constexpr,  # B_blk, token slots per KV block
    PAD_R: tl.constexpr,  # GROUP rounded up to a power of two >= 16
    PAD_D: tl.constexpr,  # HEAD_DIM rounded up to a power of two >= 16
    PAD_B: tl.constexpr,  # BLOCK_SIZE rounded up to a power of two >= 16
):
    n = tl.program_id(0)  # which sequence
    g = tl.program_id(1)  # which KV head
    offs_r = tl.arange(0, PAD_R)
    offs_d = tl.arange(0, PAD_D)
    offs_b = tl.arange(0, PAD_B)
    r_ok, d_ok, b_ok = offs_r < GROUP, offs_d < HEAD_DIM, offs_b < BLOCK_SIZE
    heads = g * GROUP + offs_r  # the query heads that read KV head g
    q_offs = (n * NUM_KV_HEADS * GROUP + heads)[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(Q + q_offs, mask=r_ok[:, None] & d_ok[None, :], other=0.0)
    q = q.to(tl.float32)  # (H/G, d)
    length = tl.load(Lens + n)
    m_i = tl.full([PAD_R], float("-inf"), tl.float32)  # running max (log2 units)
    l_i = tl.zeros([PAD_R], tl.float32)  # running sum
    acc = tl.zeros([PAD_R, PAD_D], tl.float32)  # running weighted sum of V
    # region table-walk
    for j in range(0, tl.cdiv(length, BLOCK_SIZE)):
        block = tl.load(Tables + n * max_blocks + j).to(tl.int64)  # physical id
        slot_ok = b_ok & (j * BLOCK_SIZE + offs_b < length)  # (B_blk,)
        rows = (block * BLOCK_SIZE + offs_b) * NUM_KV_HEADS + g  # (B_blk,) slot, head g
        kv_ptrs = rows[:, None] * HEAD_DIM + offs_d[None, :]  # (B_blk, d)
        kv_ok = slot_ok[:, None] & d_ok[None, :]
        k = tl.load(K + kv_ptrs, mask=kv_ok, other=0.0).to(tl.float32)  # (B_blk, d)
        v = tl.load(V + kv_ptrs, mask=kv_ok, other=0.0).to(tl.float32)  # (B_blk, d)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale  # (H/G, B_blk)
        s = tl.where(slot_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])  # (H/G, B_blk)
        alpha = tl.math.exp2(m_i - m_new)  # rescales what was summed so far
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")  # (H/G, d)
        m_i = m_new
    # endregion
    acc = acc / l_i[:, None]  # (H/G, d)
    tl.store(Out + q_offs, acc, mask=r_ok[:, None] & d_ok[None, :])


def pack_block_tables(
    block_tables: Sequence[Sequence[int]],
    context_lens: Sequence[int],
    block_size: int,
    num_blocks: int,
    device: torch.device | str = "cpu",
) -> tuple[Tensor, Tensor]:
    """Check the tables and lay them out as the kernel reads them.

    Args:
        block_tables: ``N`` block tables (physical block ids).
        context_lens: ``N`` lengths ``T_n >= 1``.
        block_size: token slots per block ``B_blk``.
        num_blocks: blocks in the pool ``N_blk``; every id must be below it.
        device: where the kernel runs.

    Returns:
        ``tables`` of shape ``(N, max_blocks)`` (int32, padded with block 0, never
        read) and ``lens`` of shape ``(N,)`` (int32).

    Raises:
        ValueError: if the counts differ, a length is below 1 or does not fit its
            table, or a block id lies outside ``[0, num_blocks)``.
    """
    if len(block_tables) != len(context_lens) or not context_lens:
        raise ValueError(
            f"block_tables and context_lens must have the same number N >= 1 of "
            f"entries, got {len(block_tables)} and {len(context_lens)}"
        )
    used = []
    for i, (table, length) in enumerate(zip(block_tables, context_lens, strict=True)):
        if length < 1 or -(-length // block_size) > len(table):
            raise ValueError(
                f"context_lens[{i}]={length} must be >= 1 and fit block_tables[{i}] "
                f"({len(table)} blocks of {block_size})"
            )
        blocks = [int(b) for b in table[: -(-length // block_size)]]
        if any(not 0 <= b < num_blocks for b in blocks):
            raise ValueError(
                f"block_tables[{i}] holds block ids outside [0, {num_blocks}): {blocks}"
            )
        used.append(blocks)
    tables = torch.zeros(len(used), max(map(len, used)), dtype=torch.int32)
    for i, blocks in enumerate(used):
        tables[i, : len(blocks)] = torch.tensor(blocks, dtype=torch.int32)
    lens = torch.tensor(list(context_lens), dtype=torch.int32)
    return tables.to(device), lens.to(device)


def paged_decode_attention_triton(
    q: Tensor,
    cache: PagedKVCache,
    block_tables: Sequence[Sequence[int]] | Tensor,
    context_lens: Sequence[int] | Tensor,
) -> Tensor:
    """One decode step of paged attention: one program per (sequence, KV head).

    Args:
        q: one query per sequence, shape ``(N, H, d)``, ``H`` a multiple of ``G``; on
            a GPU, or on the CPU under ``TRITON_INTERPRET=1``.
        cache: the paged K/V of this layer, on ``q``'s device.
        block_tables: ``N`` block tables, or the ``(N, max_blocks)`` int32 tensor of
            :func:`pack_block_tables` (then ``context_lens`` is its ``lens``).
        context_lens: ``N`` lengths ``T_n >= 1`` (the new token included).

    Returns:
        The attention output, shape ``(N, H, d)``, in ``q``'s dtype.

    Raises:
        ImportError: Triton is not installed.
        RuntimeError: CPU tensors, but the kernel was not defined in interpreter mode.
        ValueError: inconsistent shapes, devices, lengths or tables.
    """
    if not HAS_TRITON:
        raise ImportError("paged_decode_attention_triton needs the triton package")
    n_blk, b, g, d = cache.k_cache.shape
    if q.dim() != 3 or q.shape[2] != d or q.shape[1] % g != 0:
        raise ValueError(
            f"q must have shape (N, H, {d}) with H a multiple of G={g}, "
            f"got {tuple(q.shape)}"
        )
    if cache.k_cache.device != q.device:
        raise ValueError(
            f"cache is on {cache.k_cache.device}, q on {q.device}: they must match"
        )
    if q.device.type == "cpu" and type(_paged_decode).__name__ != "InterpretedFunction":
        raise RuntimeError(
            "Triton runs CPU tensors only in its interpreter: set "
            "TRITON_INTERPRET=1 before importing this module"
        )
    if isinstance(block_tables, Tensor):
        tables = block_tables.to(device=q.device, dtype=torch.int32).contiguous()
        lens = torch.as_tensor(context_lens, dtype=torch.int32, device=q.device)
    else:
        tables, lens = pack_block_tables(block_tables, context_lens, b, n_blk, q.device)
    if tables.dim() != 2 or tables.shape[0] != q.shape[0] or lens.shape != (len(q),):
        raise ValueError(
            f"block_tables must be (N={len(q)}, max_blocks) and context_lens (N,), "
            f"got {tuple(tables.shape)} and {tuple(lens.shape)}"
        )
    if isinstance(block_tables, Tensor) and (
        int(lens.min()) < 1
        or int(lens.max()) > tables.shape[1] * b
        or int(tables.min()) < 0
        or int(tables.max()) >= n_blk
    ):
        raise ValueError(
            f"context_lens must lie in [1, {tables.shape[1] * b}] and block ids in "
            f"[0, {n_blk})"
        )
    n, h = q.shape[0], q.shape[1]
    out = torch.empty(n, h, d, dtype=torch.float32, device=q.device)  # (N, H, d)
    _paged_decode[(n, g)](
        q.contiguous(),
        cache.k_cache,
        cache.v_cache,
        tables,
        lens,
        out,
        math.log2(math.e) / math.sqrt(d),
        tables.shape[1],
        NUM_KV_HEADS=g,
        GROUP=h // g,
        HEAD_DIM=d,
        BLOCK_SIZE=b,
        PAD_R=max(16, triton.next_power_of_2(h // g)),  # tl.dot's minimum is 16
        PAD_D=max(16, triton.next_power_of_2(d)),
        PAD_B=max(16, triton.next_power_of_2(b)),
    )
    return out.to(q.dtype)  # PyTorch rounds to bf16/fp16 (to nearest)
