"""Intensities against FlopCounterMode and the bytes of the tensors a kernel touches."""

import pytest
import torch
from aiinfra.accelerators import GPUS
from aiinfra.models.attention.gqa import grouped_attention
from aiinfra.models.attention.kv_cache_size import measured_elements_per_token
from aiinfra.models.flash.attention import standard_attention
from aiinfra.models.presets import preset
from aiinfra.models.roofline import (
    decode_attention,
    matmul,
    prefill_attention,
    roofline_table,
)
from torch.utils.flop_counter import FlopCounterMode


def _counted(fn, *args) -> int:
    with FlopCounterMode(display=False) as counter:
        out = fn(*args)
    return counter.get_total_flops(), out


def _nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_matmul_counts_flops_and_the_bytes_of_a_b_c():
    a, b = (
        torch.ones(3, 5, dtype=torch.bfloat16),
        torch.ones(5, 7, dtype=torch.bfloat16),
    )
    flops, c = _counted(torch.mm, a, b)
    kernel = matmul(3, 5, 7)
    assert (kernel.flops, kernel.bytes) == (flops, _nbytes(a, b, c))


def test_flash_prefill_counts_flops_of_attention_and_bytes_of_q_k_v_o():
    q, k, v = (torch.ones(1, 1, 24, 8, dtype=torch.bfloat16) for _ in range(3))
    flops, o = _counted(standard_attention, q, k, v)
    kernel = prefill_attention(24, 8)
    assert (kernel.flops, kernel.bytes) == (flops, _nbytes(q, k, v, o))
    assert kernel.intensity == 24 / 2  # N / 2 FLOP per byte in bf16


@pytest.mark.parametrize("name", ["llama-3-8b", "mistral-7b"])
def test_decode_gqa_reads_the_cache_the_layer_holds(name):
    c, S = preset(name), 40
    H, G, D = c.n_heads, c.n_kv_heads, c.head_dim
    q = torch.ones(1, H, 1, D)
    k, v = torch.ones(1, G, S, D), torch.ones(1, G, S, D)
    flops, _ = _counted(grouped_attention, q, k, v, S - 1)
    cache_bytes = measured_elements_per_token(c, n_layers=1, seq_len=2) * S * 2
    kernel = decode_attention(c, S)
    assert (kernel.flops, kernel.bytes) == (flops, cache_bytes)
    assert kernel.intensity == H / G  # one byte of cache serves H / G heads


def test_absorbed_mla_attends_over_the_latent_with_every_head():
    c, S = preset("deepseek-v2"), 16
    d_c, d_r = c.kv_lora_rank, c.rope_head_dim
    q = torch.ones(1, c.n_heads, 1, d_c + d_r)  # W^UK absorbed into the query
    k, latent = torch.ones(1, 1, S, d_c + d_r), torch.ones(1, 1, S, d_c)
    flops, _ = _counted(grouped_attention, q, k, latent, S - 1)
    kernel = decode_attention(c, S)
    assert kernel.flops == flops
    assert kernel.bytes == (d_c + d_r) * S * 2  # DeepSeek-V2 Table 1, bf16


def test_decode_is_memory_bound_and_absorbed_mla_is_not_on_a100():
    llama, deepseek = preset("llama-3-8b"), preset("deepseek-v2")
    ridges = [g.ridge for g in GPUS.values()]
    assert decode_attention(llama, 8192).intensity < min(ridges) / 10
    assert decode_attention(deepseek, 8192, absorbed=False).intensity == 1
    mla = decode_attention(deepseek, 8192).intensity
    assert GPUS["A100"].ridge < mla < GPUS["H100"].ridge


def test_table_has_one_share_per_gpu():
    table = roofline_table(context=1024)
    assert len(table.columns) == 4 + len(GPUS)
    assert table.rows[0][4:] == ["100.0%"] * len(GPUS)  # a big GEMM is compute-bound


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: matmul(0, 4, 4), "m must be"),
        (lambda: prefill_attention(8, 0), "head_dim"),
        (lambda: decode_attention(preset("gpt2"), -1), "context"),
        (lambda: decode_attention(preset("gpt2"), 8, query_tokens=0), "query_tokens"),
    ],
)
def test_bad_sizes_are_rejected(call, match):
    with pytest.raises(ValueError, match=match):
        call()
