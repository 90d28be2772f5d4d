"""Paged attention: a KV cache in blocks, read through per-sequence block tables.

The paged KV cache is two tensors ``k_cache, v_cache`` of shape ``(N_blk, B, G, d)``:
``N_blk`` physical blocks of ``B`` token slots, each slot holding the keys (values) of
``G`` KV heads of size ``d``. Token ``t`` of a sequence lives in block
``table[t // B]``, slot ``t % B`` (Kwon et al. 2023, PagedAttention). Decode attention
for a batch of sequences of different lengths ``L_n`` gathers each sequence's blocks
through its table, masks the slots past ``L_n`` and computes
``softmax(q k^T / sqrt(d)) v`` for each of the ``H`` query heads, query head ``h``
reading KV head ``h // (H / G)`` (grouped-query attention). The result equals
contiguous attention on the unpadded sequences; a fused kernel does the same gather
block by block without materialising the padded K/V.
"""

from collections.abc import Sequence

import torch

from aiinfra import checks


def _check_table(name: str, table: Sequence[int], num_blocks: int) -> None:
    if any(not 0 <= int(b) < num_blocks for b in table):
        raise ValueError(f"{name} holds block ids outside [0, {num_blocks}): {table}")


class PagedKVCache:
    """The K and V blocks of one attention layer.

    Args:
        num_blocks: physical blocks ``N_blk`` (>= 1).
        block_size: token slots per block ``B`` (>= 1).
        num_kv_heads: KV heads ``G`` (>= 1).
        head_dim: head size ``d`` (>= 1).
        dtype: element type of the cache.
        device: where the cache lives.

    Raises:
        ValueError: if a size is below 1.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        checks.positive_ints(
            num_blocks=num_blocks,
            block_size=block_size,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
        )
        shape = (num_blocks, block_size, num_kv_heads, head_dim)  # (N_blk, B, G, d)
        self.k_cache = torch.zeros(shape, dtype=dtype, device=device)
        self.v_cache = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size = block_size

    def write(
        self, block_table: Sequence[int], start: int, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        """Store the K/V of tokens ``start .. start + T - 1`` through a block table.

        Args:
            block_table: the sequence's physical block ids.
            start: position of the first new token (>= 0).
            k: new keys, shape ``(T, G, d)``.
            v: new values, shape ``(T, G, d)``.

        Raises:
            ValueError: if shapes disagree with the cache or the table is too short.
        """
        g_d = tuple(self.k_cache.shape[2:])
        if k.dim() != 3 or tuple(k.shape[1:]) != g_d or k.shape != v.shape:
            raise ValueError(
                f"k and v must both have shape (T, {g_d[0]}, {g_d[1]}), "
                f"got {tuple(k.shape)} and {tuple(v.shape)}"
            )
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        end = start + k.shape[0]
        if -(-end // self.block_size) > len(block_table):
            raise ValueError(
                f"block_table has {len(block_table)} blocks, positions up to {end - 1} "
                f"need {-(-end // self.block_size)}"
            )
        _check_table("block_table", block_table, self.k_cache.shape[0])
        pos = torch.arange(start, end, device=k.device)  # (T,)
        table = torch.as_tensor(list(block_table), device=k.device)
        blocks, slots = table[pos // self.block_size], pos % self.block_size  # (T,)
        self.k_cache[blocks, slots] = k.to(self.k_cache.dtype)
        self.v_cache[blocks, slots] = v.to(self.v_cache.dtype)

    def copy_block(self, src: int, dst: int) -> None:
        """Copy block ``src`` into ``dst`` (the copy of copy-on-write)."""
        _check_table("(src, dst)", (src, dst), self.k_cache.shape[0])
        self.k_cache[dst] = self.k_cache[src]
        self.v_cache[dst] = self.v_cache[src]


def paged_decode_attention(
    q: torch.Tensor,
    cache: PagedKVCache,
    block_tables: Sequence[Sequence[int]],
    context_lens: Sequence[int],
) -> torch.Tensor:
    """One decode step of attention for ``N`` sequences reading K/V through tables.

    Args:
        q: one query per sequence, shape ``(N, H, d)``; ``H`` a multiple of ``G``.
        cache: the paged K/V of this layer.
        block_tables: ``N`` block tables.
        context_lens: ``N`` lengths ``L_n >= 1`` (tokens cached, the new one included).

    Returns:
        The attention output, shape ``(N, H, d)``.

    Raises:
        ValueError: if shapes, lengths or tables are inconsistent.
    """
    n, h, d = q.shape if q.dim() == 3 else (0, 0, 0)
    _, b, g, d_cache = cache.k_cache.shape
    if q.dim() != 3 or d != d_cache or h % g != 0:
        raise ValueError(
            f"q must have shape (N, H, {d_cache}) with H a multiple of G={g}, "
            f"got {tuple(q.shape)}"
        )
    if len(block_tables) != n or len(context_lens) != n:
        raise ValueError(
            f"block_tables and context_lens must have N={n} entries, "
            f"got {len(block_tables)} and {len(context_lens)}"
        )
    for i, (table, length) in enumerate(zip(block_tables, context_lens, strict=True)):
        if length < 1 or -(-length // b) > len(table):
            raise ValueError(
                f"context_lens[{i}]={length} must be >= 1 and fit block_tables[{i}] "
                f"({len(table)} blocks of {b})"
            )
        _check_table(f"block_tables[{i}]", table, cache.k_cache.shape[0])
    max_blocks = max(-(-length // b) for length in context_lens)
    # Pad the tables with block 0: its slots are masked out below.
    tables = torch.zeros(n, max_blocks, dtype=torch.long, device=q.device)
    for i, (table, length) in enumerate(zip(block_tables, context_lens, strict=True)):
        used = list(table[: -(-length // b)])
        tables[i, : len(used)] = torch.as_tensor(used, device=q.device)
    k = cache.k_cache[tables].reshape(n, max_blocks * b, g, d)  # (N, S, G, d)
    v = cache.v_cache[tables].reshape(n, max_blocks * b, g, d)  # (N, S, G, d)
    lens = torch.as_tensor(list(context_lens), device=q.device)
    valid = torch.arange(max_blocks * b, device=q.device) < lens[:, None]  # (N, S)
    q_grouped = q.reshape(n, g, h // g, d).to(k.dtype)  # (N, G, H/G, d)
    scores = torch.einsum("ngrd,nsgd->ngrs", q_grouped, k) / d**0.5  # (N, G, H/G, S)
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    out = torch.einsum("ngrs,nsgd->ngrd", p, v)  # (N, G, H/G, d)
    return out.reshape(n, h, d).to(q.dtype)  # (N, H, d)
