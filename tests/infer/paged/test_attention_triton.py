"""The Triton paged decode-attention kernel against SDPA and the PyTorch version.

The end of the file checks the allocator runs behind the page's figures.

conftest.py sets TRITON_INTERPRET=1 on a machine without a GPU, so the kernel runs on
CPU tensors at tiny shapes; the full-size check and its timing need a GPU.
"""

import importlib.util
import os
import sys
import time

import aiinfra.infer.paged.attention_triton as paged_triton
import aiinfra.infer.paged.figures as paged_figures
import pytest
import torch
import torch.nn.functional as F
from aiinfra.infer.paged.attention import PagedKVCache, paged_decode_attention
from aiinfra.infer.paged.block_allocator import BlockAllocator
from aiinfra.infer.paged.waste import request_stream_waste, reserved_slots

needs_triton = pytest.mark.skipif(
    not paged_triton.HAS_TRITON, reason="triton is not installed"
)
interpreted = os.environ.get("TRITON_INTERPRET") == "1"
on_cpu = pytest.mark.skipif(
    not interpreted, reason="the CPU tests need TRITON_INTERPRET=1"
)


def paged_batch(lens, block_size, g, h, d, dtype, device="cpu", seed=0):
    """Sequences written through interleaved block tables, and their contiguous K/V.

    Returns q (N, H, d), the cache, the tables, and per sequence K, V (T_n, G, d).
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    num_blocks = sum(-(-n // block_size) for n in lens) + 3
    alloc = BlockAllocator(num_blocks, block_size, enable_prefix_caching=False)
    cache = PagedKVCache(num_blocks, block_size, g, d, dtype, device)
    kv = [
        [torch.randn(n, g, d, generator=gen, device=device, dtype=dtype) for _ in "kv"]
        for n in lens
    ]
    for i in range(len(lens)):  # first token of every sequence, then the rest
        alloc.allocate(i, [0])
    for t in range(1, max(lens)):  # one token at a time: the tables interleave
        for i, n in enumerate(lens):
            if t < n:
                alloc.append(i, t)
    tables = [alloc.block_tables[i] for i in range(len(lens))]
    for table, (k, v) in zip(tables, kv, strict=True):
        cache.write(table, 0, k, v)
    q = torch.randn(len(lens), h, d, generator=gen, device=device, dtype=dtype)
    return q, cache, tables, kv


def sdpa_per_sequence(q, kv, dtype=torch.float64):
    """Attention of each sequence's one query over its own contiguous K/V."""
    outs = []
    for i, (k, v) in enumerate(kv):
        o = F.scaled_dot_product_attention(
            q[i, :, None].to(dtype),  # (H, 1, d)
            k.transpose(0, 1).to(dtype),  # (G, T_n, d)
            v.transpose(0, 1).to(dtype),
            enable_gqa=True,
        )
        outs.append(o[:, 0])  # (H, d)
    return torch.stack(outs)  # (N, H, d)


@needs_triton
@on_cpu
@pytest.mark.parametrize(
    ("lens", "block_size", "g", "h", "d"),
    [
        ([1, 8, 9], 4, 2, 4, 8),  # GQA; lengths inside, at and past a block edge
        ([5, 16, 3], 4, 1, 3, 8),  # MQA with 3 query heads (padded to 4 rows)
        ([9, 2], 3, 2, 2, 6),  # MHA; block size and head size not powers of two
    ],
)
def test_triton_kernel_equals_sdpa_and_the_pytorch_version(lens, block_size, g, h, d):
    q, cache, tables, kv = paged_batch(lens, block_size, g, h, d, torch.float32)
    assert any(t != sorted(t) or t[-1] - t[0] >= len(t) for t in tables)  # scattered
    ours = paged_triton.paged_decode_attention_triton(q, cache, tables, lens)
    assert ours.shape == q.shape and ours.dtype == q.dtype
    torch.testing.assert_close(
        ours.double(), sdpa_per_sequence(q, kv), atol=2e-6, rtol=0
    )
    torch.testing.assert_close(
        ours, paged_decode_attention(q, cache, tables, lens), atol=2e-6, rtol=0
    )
    if block_size == 3:  # the packed tensors the engine keeps give the same result
        packed = paged_triton.pack_block_tables(tables, lens, 3, len(cache.k_cache))
        run = paged_triton.paged_decode_attention_triton
        assert torch.equal(run(q, cache, *packed), ours)


@needs_triton
@on_cpu
def test_triton_kernel_reads_shared_and_copied_blocks_after_a_fork():
    # Two samples share a prompt of 6 tokens (block size 4), then diverge: the
    # child's partial block is copied on write and the two differ in the last token.
    g, h, d, b = 1, 2, 8, 4
    gen = torch.Generator().manual_seed(1)
    alloc = BlockAllocator(6, b)
    cache = PagedKVCache(6, b, g, d)
    prompt_k, prompt_v = torch.randn(2, 6, g, d, generator=gen)
    alloc.allocate(0, range(6))
    cache.write(alloc.block_tables[0], 0, prompt_k, prompt_v)
    alloc.fork(0, 1)
    ks, vs = torch.randn(2, 2, 1, g, d, generator=gen)  # (sample, k/v ..) new token
    for seq in (0, 1):
        copy = alloc.append(seq, 100 + seq)
        if copy is not None:
            cache.copy_block(*copy)
        cache.write(alloc.block_tables[seq], 6, ks[seq], vs[seq])
    tables = [alloc.block_tables[0], alloc.block_tables[1]]
    assert tables[0][0] == tables[1][0] and tables[0][1] != tables[1][1]
    q = torch.randn(2, h, d, generator=gen)
    kv = [(torch.cat([prompt_k, ks[s]]), torch.cat([prompt_v, vs[s]])) for s in (0, 1)]
    ours = paged_triton.paged_decode_attention_triton(q, cache, tables, [7, 7])
    torch.testing.assert_close(
        ours.double(), sdpa_per_sequence(q, kv), atol=2e-6, rtol=0
    )


@needs_triton
@on_cpu
def test_triton_kernel_in_bf16_is_at_most_twice_as_wrong_as_sdpa():
    lens = [11, 4]
    q, cache, tables, kv = paged_batch(lens, 4, 2, 4, 16, torch.bfloat16, seed=2)
    ref = sdpa_per_sequence(q, kv)  # fp64 on the same bf16 inputs
    theirs = sdpa_per_sequence(q, kv, torch.bfloat16)
    ours = paged_triton.paged_decode_attention_triton(q, cache, tables, lens)
    assert ours.dtype == torch.bfloat16
    err, err_sdpa = ((x.double() - ref).abs().max().item() for x in (ours, theirs))
    assert err <= 2 * err_sdpa + 2 * torch.finfo(torch.bfloat16).eps * 0.5


@needs_triton
def test_bad_input_is_rejected():
    cache = PagedKVCache(4, 4, 2, 8)
    q = torch.randn(1, 4, 8)
    run = paged_triton.paged_decode_attention_triton
    with pytest.raises(ValueError, match=r"q must have shape \(N, H, 8\)"):
        run(torch.randn(1, 3, 8), cache, [[0]], [1])  # H=3 not a multiple of G=2
    with pytest.raises(ValueError, match=r"context_lens\[0\]=5 must be >= 1 and fit"):
        run(q, cache, [[0]], [5])
    with pytest.raises(ValueError, match=r"context_lens\[0\]=0"):
        run(q, cache, [[0]], [0])
    with pytest.raises(ValueError, match=r"outside \[0, 4\)"):
        run(q, cache, [[4]], [2])
    with pytest.raises(ValueError, match="same number N >= 1"):
        run(q, cache, [[0], [1]], [1])
    with pytest.raises(ValueError, match=r"block ids in \[0, 4\)"):
        run(q, cache, torch.tensor([[7]]), torch.tensor([1]))
    with pytest.raises(ValueError, match=r"must be \(N=1, max_blocks\)"):
        run(q, cache, torch.tensor([0]), torch.tensor([1]))


def test_the_module_imports_without_triton(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` now fails
    monkeypatch.setitem(sys.modules, "triton.language", None)
    spec = importlib.util.spec_from_file_location(
        "paged_triton_no_triton", paged_triton.__file__
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not module.HAS_TRITON
    with pytest.raises(ImportError, match="needs the triton package"):
        module.paged_decode_attention_triton(
            torch.randn(1, 2, 8), PagedKVCache(1, 4, 2, 8), [[0]], [1]
        )


def cuda_ms(fn, repeats=20):
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats * 1e3


@pytest.mark.gpu
@needs_triton
@pytest.mark.skipif(interpreted, reason="compiles the kernel: needs a GPU")
def test_triton_kernel_at_full_size_on_a_gpu_beats_the_gather_version():
    # Llama 3 8B's attention shape (H=32, G=8, d=128), bf16, B=16, 64 sequences of
    # 1..4096 tokens: the 2x rule against an fp32 SDPA reference, and a kernel that
    # reads each block once instead of gathering padded K/V.
    gen = torch.Generator().manual_seed(0)
    lens = torch.randint(1, 4097, (64,), generator=gen).tolist()
    q, cache, tables, kv = paged_batch(lens, 16, 8, 32, 128, torch.bfloat16, "cuda")
    ref = sdpa_per_sequence(q, kv, torch.float32)
    theirs = sdpa_per_sequence(q, kv, torch.bfloat16)
    ours = paged_triton.paged_decode_attention_triton(q, cache, tables, lens)
    err, err_sdpa = ((x.float() - ref).abs().max().item() for x in (ours, theirs))
    assert err <= 2 * err_sdpa + 1e-5, (err, err_sdpa)
    packed = paged_triton.pack_block_tables(
        tables, lens, 16, len(cache.k_cache), "cuda"
    )
    t_triton = cuda_ms(
        lambda: paged_triton.paged_decode_attention_triton(q, cache, *packed)
    )
    t_torch = cuda_ms(lambda: paged_decode_attention(q, cache, tables, lens))
    kv_bytes = 2 * sum(lens) * 8 * 128 * 2
    print(
        f"paged decode, 64 seqs, {sum(lens)} tokens: triton {t_triton:.3f} ms "
        f"({kv_bytes / t_triton / 1e6:.0f} GB/s), pytorch gather {t_torch:.3f} ms"
    )
    assert t_triton < t_torch


# The allocator runs behind the page's figures (aiinfra.infer.paged.figures), checked
# against counts done by hand.


def test_prefix_caching_shares_only_the_full_blocks_of_the_system_prompt():
    # 41-token prompts (40 shared + 1 own), blocks of 16: 3 blocks each, the first 2
    # full and identical; the third mixes the prompt's end with the own token.
    without, with_cache, cached = paged_figures.prefix_sharing_blocks(5, 40, 1, 16, 0)
    assert (without, with_cache, cached) == (5 * 3, 5 * 3 - 4 * 2, 4 * 32)
    # 48 shared tokens: 3 full blocks shared, the own token opens a 4th block.
    assert paged_figures.prefix_sharing_blocks(5, 48, 1, 16, 0) == (20, 8, 4 * 48)


def test_forked_samples_share_full_blocks_and_copy_the_partial_one():
    # Prompt 20 = 1 full block + 4 tokens; 4 samples add 5 tokens each (9 <= 16):
    # 1 shared block + 4 last blocks, 3 of them copies; separate: 4 x ceil(25/16).
    assert paged_figures.parallel_sampling_blocks(4, 20, 5, 16) == (8, 5, 3)
    # A prompt of whole blocks: nothing to copy, every sample opens its own block.
    assert paged_figures.parallel_sampling_blocks(4, 32, 5, 16) == (12, 6, 0)


def test_the_figure_stream_is_the_waste_model_stream():
    prompt, output = paged_figures.draw_lengths(50, 64, 32, seed=3)
    gen = torch.Generator().manual_seed(3)
    ref = request_stream_waste(50, 64, 32, 16, 1, gen)
    assert reserved_slots(prompt, output, 16, 96) == ref


def test_the_block_table_run_reuses_the_freed_blocks():
    alloc = paged_figures.block_table_run()
    tables = alloc.block_tables
    assert sorted(tables) == [1, 2, 3] and alloc.num_free_blocks == 0
    assert set(tables[3]) == set(range(8)) - set(tables[1]) - set(tables[2])
    assert tables[3] != sorted(tables[3])  # the freed blocks come last, out of order


def test_figure_helpers_reject_bad_counts():
    with pytest.raises(ValueError, match="num_requests must be an int >= 1"):
        paged_figures.prefix_sharing_blocks(0, 40, 1, 16, 0)
    with pytest.raises(ValueError, match="prompt_len must be an int >= 1"):
        paged_figures.parallel_sampling_blocks(2, 0, 5, 16)
    with pytest.raises(ValueError, match="max_output_len must be an int >= 1"):
        paged_figures.draw_lengths(5, 8, 0, seed=0)
