"""Every value, table and figure of the models chapter (``docs/models``).

The running examples are Llama 3 8B (GQA) and DeepSeek-V2 (MLA) from the preset
table (:mod:`aiinfra.models.presets`); the attention memory is measured on the CPU
at build time (one head of width 64, fp32).
"""

from __future__ import annotations

import dataclasses
import functools

from matplotlib.figure import Figure

from aiinfra.models import (
    attention_memory,
    checkpoint_check,
    flops,
    kv_cache_size,
    steps,
)
from aiinfra.models.config import TransformerConfig
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

SCORES = (1.0, 3.0, 2.0, 0.5, 4.0, 2.5, 1.5, 5.0)  # the maximum grows three times


def online_softmax_figure() -> Figure:
    """The online softmax's state after each of eight scores, in a grid."""
    return steps.softmax_figure(SCORES)


def online_softmax_frames() -> list[Figure]:
    """The online softmax's state after each of eight scores, one frame each."""
    return steps.softmax_frames(SCORES)


def flash_tiles_figure() -> Figure:
    """The tiles causal tiled_forward visits, 4 x 4 blocks, in a grid."""
    return steps.tile_figure(n=8, block_q=2, block_k=2, causal=True)


def flash_tiles_frames() -> list[Figure]:
    """The tiles causal tiled_forward visits, 4 x 4 blocks, one frame each."""
    return steps.tile_frames(n=8, block_q=2, block_k=2, causal=True)


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


# questions.rst

HBM_GIB = 80  # memory of the accelerator in the serving question
TILES_N, TILES_BLOCK = 2048, 128  # sequence and block length in the tiles question


def llama_matmul_parameters() -> int:
    """N of the 6N rule for Llama 3 8B: weights that enter a matmul."""
    return flops.matmul_parameters(preset(LLAMA))


def llama_attention_flops_per_position() -> int:
    """12 L H Q, Llama 3 8B's attention FLOPs per token and position attended."""
    return flops.attention_flops_per_token(preset(LLAMA), 1)


def llama_attention_parity_tokens() -> float:
    """Sequence length at which Llama 3 8B's attention FLOPs equal its 6N."""
    return 6 * llama_matmul_parameters() / llama_attention_flops_per_position()


def llama_heads() -> int:
    """Query heads of Llama 3 8B."""
    return preset(LLAMA).n_heads


def llama_kv_heads() -> int:
    """Key/value heads of Llama 3 8B."""
    return preset(LLAMA).n_kv_heads


def llama_layers() -> int:
    """Layers of Llama 3 8B."""
    return preset(LLAMA).n_layers


def _kv_tokens_fitting(c: TransformerConfig) -> int:
    free = HBM_GIB * GIB - 2 * llama_parameters()  # bytes left after bf16 weights
    return free // (2 * kv_cache_size.elements_per_token(c))


def llama_kv_tokens_fitting() -> int:
    """Tokens of bf16 KV cache that fit in HBM_GIB next to Llama 3 8B's weights."""
    return _kv_tokens_fitting(preset(LLAMA))


def llama_mha_kv_tokens_fitting() -> int:
    """The same if Llama 3 8B had one KV head per query head (MHA)."""
    c = preset(LLAMA)
    return _kv_tokens_fitting(dataclasses.replace(c, n_kv_heads=c.n_heads))


def llama_sequences_fitting() -> int:
    """Sequences of Llama 3 8B's context length whose KV cache fits, GQA."""
    return llama_kv_tokens_fitting() // llama_context()


def llama_mha_sequences_fitting() -> int:
    """Sequences of Llama 3 8B's context length whose KV cache fits, had it MHA."""
    return llama_mha_kv_tokens_fitting() // llama_context()


def llama_probabilities_gib_per_layer() -> float:
    """GiB of bf16 P, (H, T, T), that standard attention keeps per layer, T = 8192."""
    return llama_heads() * llama_context() ** 2 * 2 / GIB


def llama_probabilities_gib() -> float:
    """The same over all of Llama 3 8B's layers."""
    return llama_probabilities_gib_per_layer() * llama_layers()


def llama_lse_mib_per_layer() -> float:
    """MiB of fp32 log-sum-exp, (H, T), that FlashAttention keeps per layer."""
    return llama_heads() * llama_context() * 4 / 2**20


def tile_blocks() -> int:
    """T, blocks of TILES_BLOCK in TILES_N positions."""
    return -(-TILES_N // TILES_BLOCK)


@functools.cache
def _tiles(causal: bool) -> list[steps.TileStep]:
    return steps.tile_steps(TILES_N, TILES_BLOCK, TILES_BLOCK, causal)[1:]


def causal_tiles_computed() -> int:
    """Tiles causal tiled_forward computes, N = TILES_N, blocks of TILES_BLOCK."""
    return len(_tiles(causal=True))


def full_tiles_computed() -> int:
    """Tiles non-causal tiled_forward computes, the same sizes."""
    return len(_tiles(causal=False))


def causal_tiles_masked() -> int:
    """Of the causal tiles, those that cross the diagonal and are masked."""
    return len(_tiles(causal=True)[-1].masked)
