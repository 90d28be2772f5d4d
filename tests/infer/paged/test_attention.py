"""Tests of the block allocator, paged attention and the paged-memory waste model."""

from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from aiinfra.infer.paged.attention import PagedKVCache, paged_decode_attention
from aiinfra.infer.paged.block_allocator import BlockAllocator, OutOfBlocksError
from aiinfra.infer.paged.waste import (
    request_stream_waste,
    reserved_slots,
)


def assert_consistent(alloc: BlockAllocator) -> None:
    """Recount references from the tables alone and compare with the allocator."""
    uses = Counter(b for table in alloc.block_tables.values() for b in table)
    for block in range(alloc.num_blocks):
        assert alloc.ref_counts[block] == uses[block]
    assert alloc.num_free_blocks == alloc.num_blocks - len(uses)
    for seq_id, table in alloc.block_tables.items():
        n = len(alloc.token_ids[seq_id])
        assert len(table) == -(-n // alloc.block_size)
        assert len(set(table)) == len(table)


def test_allocate_gives_disjoint_tables_and_free_returns_blocks() -> None:
    alloc = BlockAllocator(num_blocks=8, block_size=4, enable_prefix_caching=False)
    a = alloc.allocate(0, range(10))  # 10 tokens -> 3 blocks
    b = alloc.allocate(1, range(100, 105))  # 5 tokens -> 2 blocks
    assert len(a) == 3 and len(b) == 2 and not set(a) & set(b)
    assert alloc.num_free_blocks == 3
    for t in range(2):  # 10 -> 12 tokens fits block 3; the 13th needs a 4th block
        assert alloc.append(0, t) is None
    assert len(alloc.block_tables[0]) == 3
    alloc.append(0, 7)
    assert len(alloc.block_tables[0]) == 4 and alloc.num_free_blocks == 2
    assert_consistent(alloc)
    alloc.free(0)
    alloc.free(1)
    assert alloc.num_free_blocks == 8 and alloc.ref_counts == [0] * 8


def test_random_operations_keep_reference_counts_equal_to_table_uses() -> None:
    gen = torch.Generator().manual_seed(0)
    alloc = BlockAllocator(num_blocks=24, block_size=3)
    live: list[int] = []
    for step in range(300):
        op = int(torch.randint(4, (1,), generator=gen))
        try:
            if op == 0 or not live:
                prompt = torch.randint(
                    3, (int(torch.randint(1, 8, (1,), generator=gen)),), generator=gen
                ).tolist()  # few ids: prefixes repeat
                alloc.allocate(step, prompt)
                live.append(step)
            elif op == 1:
                alloc.fork(
                    live[int(torch.randint(len(live), (1,), generator=gen))], step
                )
                live.append(step)
            elif op == 2:
                alloc.append(
                    live[int(torch.randint(len(live), (1,), generator=gen))], 1
                )
            else:
                alloc.free(live.pop(int(torch.randint(len(live), (1,), generator=gen))))
        except OutOfBlocksError:
            alloc.free(live.pop(0))
        assert_consistent(alloc)


def test_fork_then_append_copies_exactly_the_shared_partial_block() -> None:
    alloc = BlockAllocator(num_blocks=6, block_size=4)
    parent = alloc.allocate(0, [5, 6, 7, 8, 9, 10])  # blocks: full, partial (2 of 4)
    child = alloc.fork(0, 1)
    assert child == parent and [alloc.ref_counts[b] for b in parent] == [2, 2]
    free_before = alloc.num_free_blocks
    src, dst = alloc.append(1, 11)
    assert src == parent[1] and dst not in parent
    assert alloc.block_tables[1] == [parent[0], dst]
    assert alloc.block_tables[0] == parent
    assert alloc.num_free_blocks == free_before - 1  # one block copied, no more
    assert [alloc.ref_counts[b] for b in (parent[0], parent[1], dst)] == [2, 1, 1]
    assert alloc.append(0, 12) is None  # the parent now owns its partial block alone
    assert_consistent(alloc)


def test_fork_at_a_block_boundary_appends_without_copy() -> None:
    alloc = BlockAllocator(num_blocks=4, block_size=4)
    alloc.allocate(0, range(4))
    alloc.fork(0, 1)
    assert alloc.append(1, 9) is None
    assert alloc.block_tables[1][0] == alloc.block_tables[0][0]
    assert len(alloc.block_tables[1]) == 2
    assert_consistent(alloc)


def test_prefix_cache_reuses_full_blocks_of_a_matching_prefix() -> None:
    alloc = BlockAllocator(num_blocks=10, block_size=4)
    a = alloc.allocate(0, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    b = alloc.allocate(1, [1, 2, 3, 4, 5, 6, 7, 8, 42, 43])
    assert b[:2] == a[:2] and b[2] != a[2]
    assert alloc.num_cached_tokens[1] == 8
    # Same second block after a different first block: the hash chain says miss.
    c = alloc.allocate(2, [0, 2, 3, 4, 5, 6, 7, 8])
    assert not set(c) & set(a) and alloc.num_cached_tokens[2] == 0
    # A's second block as a first block: same tokens, other position, other hash.
    d = alloc.allocate(3, [5, 6, 7, 8])
    assert d[0] != a[1] and alloc.num_cached_tokens[3] == 0
    assert_consistent(alloc)


def test_prefix_cache_hits_after_free_and_misses_after_eviction() -> None:
    alloc = BlockAllocator(num_blocks=4, block_size=2)
    a = alloc.allocate(0, [1, 2, 3, 4])
    alloc.free(0)
    assert alloc.allocate(1, [1, 2, 3, 4, 5])[:2] == a
    assert alloc.num_cached_tokens[1] == 4 and alloc.num_free_blocks == 1
    alloc.free(1)
    alloc.allocate(2, [9, 9, 9, 9, 9, 9, 9, 9])  # takes every block: the cache is gone
    alloc.free(2)
    alloc.allocate(3, [1, 2, 3, 4])
    assert alloc.num_cached_tokens[3] == 0


def test_appended_tokens_fill_blocks_that_later_prompts_hit() -> None:
    alloc = BlockAllocator(num_blocks=6, block_size=2)
    alloc.allocate(0, [1])
    for t in (2, 3, 4):
        alloc.append(0, t)
    table = alloc.allocate(1, [1, 2, 3, 4, 5])
    assert table[:2] == alloc.block_tables[0] and alloc.num_cached_tokens[1] == 4


def test_out_of_blocks_is_named_and_changes_nothing() -> None:
    alloc = BlockAllocator(num_blocks=2, block_size=2)
    alloc.allocate(0, [1, 2, 3])
    with pytest.raises(OutOfBlocksError, match="needs 2 free blocks, 0 left"):
        alloc.allocate(1, [7, 8, 9])
    assert 1 not in alloc.block_tables and alloc.num_free_blocks == 0
    alloc.append(0, 4)
    with pytest.raises(OutOfBlocksError, match="needs a new block"):
        alloc.append(0, 5)
    assert alloc.token_ids[0] == [1, 2, 3, 4]


def test_allocator_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="num_blocks must be an int >= 1"):
        BlockAllocator(0, 4)
    with pytest.raises(ValueError, match="block_size must be an int >= 1"):
        BlockAllocator(4, 0)
    alloc = BlockAllocator(4, 2)
    with pytest.raises(ValueError, match="at least one token"):
        alloc.allocate(0, [])
    alloc.allocate(0, [1])
    with pytest.raises(ValueError, match="seq_id 0 already has a block table"):
        alloc.allocate(0, [1])
    with pytest.raises(ValueError, match="seq_id 5 has no block table"):
        alloc.append(5, 1)
    with pytest.raises(ValueError, match="seq_id 5 has no block table"):
        alloc.free(5)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (6, 2), (4, 1)])
def test_paged_decode_attention_equals_sdpa_on_unpadded_sequences(
    heads: int, kv_heads: int
) -> None:
    gen = torch.Generator().manual_seed(1)
    b, d, lengths = 4, 8, [1, 4, 7, 13]  # one partial block, one exact, several
    alloc = BlockAllocator(num_blocks=16, block_size=b)
    cache = PagedKVCache(16, b, kv_heads, d, dtype=torch.float64)
    alloc.allocate(99, range(9))  # occupy blocks so the tables are not 0, 1, 2, ...
    ks, vs = [], []
    for i, n in enumerate(lengths):
        k = torch.randn(n, kv_heads, d, generator=gen, dtype=torch.float64)
        v = torch.randn(n, kv_heads, d, generator=gen, dtype=torch.float64)
        alloc.allocate(i, [1000 * i])  # distinct first tokens: no prefix sharing
        for t in range(1, n):
            alloc.append(i, 1000 * i + t)
        half = n // 2  # write prefill and decode parts separately
        cache.write(alloc.block_tables[i], 0, k[:half], v[:half])
        cache.write(alloc.block_tables[i], half, k[half:], v[half:])
        ks.append(k)
        vs.append(v)
    q = torch.randn(len(lengths), heads, d, generator=gen, dtype=torch.float64)
    tables = [alloc.block_tables[i] for i in range(len(lengths))]
    out = paged_decode_attention(q, cache, tables, lengths)  # (N, H, d)
    for i in range(len(lengths)):
        ref = F.scaled_dot_product_attention(
            q[i][None, :, None, :],  # (1, H, 1, d)
            ks[i].transpose(0, 1)[None],  # (1, G, L, d)
            vs[i].transpose(0, 1)[None],
            enable_gqa=True,
        )[0, :, 0]  # (H, d)
        assert (out[i] - ref).abs().max() < 1e-12


def test_copy_on_write_block_copy_keeps_the_child_view_of_the_prefix() -> None:
    gen = torch.Generator().manual_seed(2)
    alloc = BlockAllocator(num_blocks=4, block_size=4)
    cache = PagedKVCache(4, 4, 1, 2, dtype=torch.float64)
    k = torch.randn(7, 1, 2, generator=gen, dtype=torch.float64)
    alloc.allocate(0, range(6))
    cache.write(alloc.block_tables[0], 0, k[:6], k[:6])
    alloc.fork(0, 1)
    src, dst = alloc.append(1, 6)
    cache.copy_block(src, dst)
    cache.write(alloc.block_tables[1], 6, k[6:], k[6:])
    q = torch.randn(2, 1, 2, generator=gen, dtype=torch.float64)
    tables = [alloc.block_tables[0], alloc.block_tables[1]]
    out = paged_decode_attention(q, cache, tables, [6, 7])
    for i, n in enumerate((6, 7)):
        kk = k[:n].transpose(0, 1)[None]  # (1, 1, n, 2)
        ref = F.scaled_dot_product_attention(q[i][None, :, None], kk, kk)[0, :, 0]
        assert (out[i] - ref).abs().max() < 1e-12


def test_paged_attention_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="head_dim must be an int >= 1"):
        PagedKVCache(4, 4, 2, 0)
    cache = PagedKVCache(4, 4, 2, 8)
    with pytest.raises(ValueError, match="H a multiple of G=2"):
        paged_decode_attention(torch.zeros(1, 3, 8), cache, [[0]], [1])
    with pytest.raises(ValueError, match="context_lens\\[0\\]=5 must be >= 1 and fit"):
        paged_decode_attention(torch.zeros(1, 4, 8), cache, [[0]], [5])
    with pytest.raises(ValueError, match="outside \\[0, 4\\)"):
        paged_decode_attention(torch.zeros(1, 4, 8), cache, [[4]], [1])
    with pytest.raises(ValueError, match="block_table has 1 blocks"):
        cache.write([0], 2, torch.zeros(3, 2, 8), torch.zeros(3, 2, 8))
    with pytest.raises(ValueError, match="k and v must both have shape"):
        cache.write([0], 0, torch.zeros(1, 3, 8), torch.zeros(1, 3, 8))


def test_reserved_slots_by_hand() -> None:
    report = reserved_slots(torch.tensor([3, 10, 1]), torch.tensor([2, 6, 16]), 16, 32)
    assert report.tokens == 5 + 16 + 17
    assert report.paged == 16 + 16 + 32
    assert report.contiguous == 3 * 32
    assert report.pow2 == (3 + 2) + (10 + 8) + (1 + 16)


def test_paged_waste_is_under_one_block_per_sequence_contiguous_waste_large() -> None:
    b = 16
    report = request_stream_waste(
        1000,
        1024,
        1024,
        b,
        800 * 1024,  # OPT-13B's bytes per token (vLLM, Sec. 3)
        torch.Generator().manual_seed(0),
    )
    assert report.paged - report.tokens < b * report.num_requests
    assert report.used_fraction("paged") > 0.96  # vLLM: under 4 % waste
    assert report.used_fraction("contiguous") < 0.6
    assert report.used_fraction("contiguous") < report.used_fraction("pow2") < 1
    assert report.bytes("paged") == report.paged * 800 * 1024


def test_waste_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="max_len=4 is below the longest request 5"):
        reserved_slots(torch.tensor([3]), torch.tensor([2]), 4, 4)
    with pytest.raises(ValueError, match="must be >= 1"):
        reserved_slots(torch.tensor([0]), torch.tensor([2]), 4, 8)
    with pytest.raises(ValueError, match="num_requests must be an int >= 1"):
        request_stream_waste(0, 8, 8, 4, 1, torch.Generator())
    with pytest.raises(ValueError, match="policy must be"):
        reserved_slots(torch.tensor([1]), torch.tensor([1]), 4, 8).used_fraction("x")


def test_time_averaged_share_counts_slots_kept_for_future_tokens_as_waste():
    # vLLM's Fig. 2 averages over the run. One request, L_p = 2, L_o = 4, blocks of
    # 4, L_max = 8, by hand over steps t = 1..4 (it holds 3, 4, 5, 6 tokens: 18):
    # max 4 x 8 = 32; pow2 (2 + 4) x 4 = 24; oracle 6 x 4 = 24; paged 4+4+8+8 = 24
    # (blocks of the tokens held).
    from aiinfra.infer.paged.waste import time_averaged_used

    shares = time_averaged_used(torch.tensor([2]), torch.tensor([4]), 4, 8)
    assert shares == pytest.approx(
        {"max": 18 / 32, "pow2": 18 / 24, "oracle": 18 / 24, "paged": 18 / 24}
    )
    # Even the oracle's exact reservation wastes over time, as vLLM's Orca (Oracle)
    g = torch.Generator().manual_seed(0)
    p, o = torch.randint(1, 513, (200,), generator=g), torch.randint(1, 513, (200,))
    s = time_averaged_used(p, o, 16, 1024)
    assert s["max"] < s["oracle"] < s["paged"] < 1
