"""KV budget against real caches allocated on the meta device."""

import pytest
import torch
from aiinfra.accelerators import GPUS
from aiinfra.models.attention.gqa import KVCache
from aiinfra.models.kv_budget import kv_budget, kv_budget_table, kv_copies
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset


def _cache_bytes(name: str, tokens: int) -> int:
    """Bytes of one layer's bf16 KVCache for ``tokens`` positions, times the layers."""
    c = preset(name)
    cache = KVCache(
        1, tokens, c.n_kv_heads, c.head_dim, dtype=torch.bfloat16, device="meta"
    )
    per_layer = sum(t.numel() * t.element_size() for t in (cache.k, cache.v))
    return per_layer * c.n_layers


@pytest.mark.parametrize(
    ("name", "gpu", "n"), [("llama-3-8b", "H100", 1), ("llama-3-70b", "H100", 4)]
)
def test_the_counted_tokens_fit_and_one_more_does_not(name, gpu, n):
    budget = kv_budget(preset(name), GPUS[gpu], n)
    free = n * GPUS[gpu].hbm_bytes - 2 * count_parameters(preset(name)).total
    assert (
        _cache_bytes(name, budget.tokens)
        <= free
        < _cache_bytes(name, budget.tokens + 1)
    )


def test_llama_3_8b_caches_128_kib_per_token():
    # 2 x 8 KV heads x 128 x 32 layers x 2 bytes = 131072 (shapes: Llama 3, Table 3)
    assert kv_budget(preset("llama-3-8b"), GPUS["H100"]).bytes_per_token == 128 * 1024


def test_llama_3_70b_does_not_fit_one_h100_or_one_h200():
    for gpu in ("H100", "H200"):
        budget = kv_budget(preset("llama-3-70b"), GPUS[gpu])
        assert budget.free_bytes < 0 and budget.tokens == 0
    assert kv_budget(preset("llama-3-70b"), GPUS["H200"], 2).tokens > 0


def test_table_counts_whole_sequences():
    table = kv_budget_table(context=8192)
    for row in table.rows:
        assert row[6] == row[5] // 8192


@pytest.mark.parametrize("kwargs", [{"n_gpus": 0}, {"bytes_per_element": 1.5}])
def test_bad_sizes_are_rejected(kwargs):
    with pytest.raises(ValueError, match="must be an int >= 1"):
        kv_budget(preset("llama-3-8b"), GPUS["H100"], **kwargs)


def test_past_g_ranks_the_kv_heads_are_replicated_as_vllm_does():
    # vLLM's ModelConfig.get_num_kv_heads: each tensor-parallel rank keeps
    # max(1, G // p) KV heads, so past p = G the group stores p / G copies.
    # Llama 3 70B, G = 8, 320 KiB of bf16 cache per token, 141.1e9 bf16 weights.
    c, h100 = preset("llama-3-70b"), GPUS["H100"]
    for p in (1, 2, 4, 8, 16, 32):
        assert kv_copies(c, p) == p * max(1, 8 // p) / 8
    weights = kv_budget(c, h100, 16).weight_bytes
    assert kv_budget(c, h100, 16).tokens == (16 * 80e9 - weights) // (2 * 327680)
    gain = kv_budget(c, h100, 16).tokens / kv_budget(c, h100, 8).tokens
    assert 1.1 < gain < 1.2  # not the doubling of p <= G
    # MLA's latent is one shared head: every rank stores all of it.
    assert kv_copies(preset("deepseek-v3"), 8) == 8
    with pytest.raises(ValueError, match="must divide evenly"):
        kv_copies(c, 12)
