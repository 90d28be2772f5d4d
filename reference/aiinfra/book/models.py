"""Every value, table and figure of the models chapter (``docs/models``).

The running examples are Llama 3 8B (GQA) and DeepSeek-V2 (MLA) from the preset
table (:mod:`aiinfra.models.presets`); the attention memory is measured on the CPU
at build time (one head of width 64, fp32).
"""

from __future__ import annotations

import functools

from matplotlib.figure import Figure

from aiinfra.models import attention_memory, checkpoint_check, flops, kv_cache_size
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.report import Table

GIB, KIB = 2**30, 2**10
LLAMA, DEEPSEEK = "llama-3-8b", "deepseek-v2"
LONG_CONTEXT = 128 * 1024  # tokens of the long-context example
SEQ_LEN = 8192  # tokens of the FLOPs example

# transformer.rst


def checkpoint_equivalence_table() -> Table:
    """Our model against transformers on saved tiny checkpoints, per family."""
    return checkpoint_check.equivalence_table()


def flops_check_table() -> Table:
    """Parameters and training FLOPs by formula and by counting, toy model."""
    return flops.flops_check_table()


def llama_parameters() -> int:
    """Parameters of Llama 3 8B."""
    return count_parameters(preset(LLAMA)).total


def llama_context() -> int:
    """Llama 3 8B's context length (its RoPE table)."""
    return preset(LLAMA).max_seq_len


def llama_attention_share() -> float:
    """Share of attention in Llama 3 8B's training FLOPs at 8192 tokens."""
    c = preset(LLAMA)
    return flops.attention_flops_per_token(c, SEQ_LEN) / flops.training_flops_per_token(
        c, SEQ_LEN
    )


def flops_breakdown_table() -> Table:
    """6N and the attention term of real dense models at 8192 tokens."""
    return flops.flops_breakdown_table(seq_len=SEQ_LEN)


# attention_variants.rst


def deepseek_latent_width() -> int:
    """d_c, the width of DeepSeek-V2's cached latent."""
    return preset(DEEPSEEK).kv_lora_rank


def deepseek_mha_width() -> int:
    """2 n_h d_h, what MHA with DeepSeek-V2's heads would cache per token, layer."""
    c = preset(DEEPSEEK)
    return 2 * c.n_heads * c.head_dim


def kv_cache_table() -> Table:
    """KV cache per token of released models, formula and measured."""
    return kv_cache_size.kv_cache_table()


def llama_kv_kib_per_token() -> float:
    """Llama 3 8B's bf16 KV cache per token, KiB."""
    return kv_cache_size.elements_per_token(preset(LLAMA)) * 2 / KIB


def llama_kv_gib_long_context() -> float:
    """Llama 3 8B's bf16 KV cache for one sequence of 128K tokens, GiB."""
    return kv_cache_size.elements_per_token(preset(LLAMA)) * 2 * LONG_CONTEXT / GIB


def llama_bf16_weights_gib() -> float:
    """Llama 3 8B's weights in bf16, GiB."""
    return 2 * llama_parameters() / GIB


def deepseek_equivalent_gqa_groups() -> float:
    """GQA groups with the same cache as DeepSeek-V2's latent."""
    return kv_cache_size.equivalent_gqa_groups(preset(DEEPSEEK))


def deepseek_mha_over_cache() -> float:
    """How much smaller DeepSeek-V2's cache is than MHA with its heads."""
    return kv_cache_size.mha_to_cache_ratio(DEEPSEEK)


# flash_attention.rst


@functools.cache
def _curve() -> dict[str, list[int]]:
    return attention_memory.memory_curve()


def attention_memory_figure() -> Figure:
    """Measured peak bytes against N, standard and tiled attention."""
    return attention_memory.memory_figure(_curve())


def attention_memory_table() -> Table:
    """The measurements behind the figure, KiB."""
    return attention_memory.memory_table(_curve())


def standard_growth_exponent() -> float:
    """Fitted growth exponent of standard attention's peak memory in N."""
    return attention_memory.growth_exponent(_curve()["N"], _curve()["standard_peak"])


def tiled_growth_exponent() -> float:
    """Fitted growth exponent of tiled attention's peak memory in N."""
    return attention_memory.growth_exponent(_curve()["N"], _curve()["tiled_peak"])


def longest_measured_n() -> int:
    """The longest sequence of the measurement."""
    return _curve()["N"][-1]


def tiled_saving_at_longest_n() -> float:
    """Standard over tiled peak memory at the longest sequence."""
    return _curve()["standard_peak"][-1] / _curve()["tiled_peak"][-1]
