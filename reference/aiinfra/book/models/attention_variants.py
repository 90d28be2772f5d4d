"""What ``docs/models/attention_variants.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.models.attention import kv_cache_size
from aiinfra.models.presets import preset
from aiinfra.report import Table

from .transformer import DEEPSEEK, LLAMA, llama_parameters

GIB, KIB = 2**30, 2**10


LONG_CONTEXT = 128 * 1024  # tokens of the long-context example


def deepseek_latent_width() -> int:
    """d_c, the width of DeepSeek-V2's cached latent."""
    return preset(DEEPSEEK).kv_lora_rank


def deepseek_mha_width() -> int:
    """2 H d, what MHA with DeepSeek-V2's heads would cache per token, layer."""
    c = preset(DEEPSEEK)
    return 2 * c.n_heads * c.head_dim


def kv_cache_table() -> Table:
    """KV cache per token of released models, formula and measured."""
    return kv_cache_size.kv_cache_table()


def kv_cache_figure() -> Figure:
    """KiB cached per token of released models, against MHA with the same heads."""
    return kv_cache_size.kv_cache_figure()


def llama_kv_kib_per_token() -> float:
    """Llama 3 8B's bf16 KV cache per token, KiB."""
    return kv_cache_size.kv_bytes_per_token(preset(LLAMA), 2) / KIB


def llama_kv_gib_long_context() -> float:
    """Llama 3 8B's bf16 KV cache for one sequence of 128K tokens, GiB."""
    return kv_cache_size.kv_bytes_per_token(preset(LLAMA), 2) * LONG_CONTEXT / GIB


def llama_bf16_weights_gib() -> float:
    """Llama 3 8B's weights in bf16, GiB."""
    return 2 * llama_parameters() / GIB


def deepseek_equivalent_gqa_groups() -> float:
    """GQA groups with the same cache as DeepSeek-V2's latent."""
    return kv_cache_size.equivalent_gqa_groups(preset(DEEPSEEK))


def deepseek_mha_over_cache() -> float:
    """How much smaller DeepSeek-V2's cache is than MHA with its heads."""
    return kv_cache_size.mha_to_cache_ratio(DEEPSEEK)
