"""What ``docs/models/questions.rst`` shows: its values, tables, figures."""

from __future__ import annotations

import dataclasses
import functools

from aiinfra.accelerators import GPUS
from aiinfra.models import flops, kv_budget
from aiinfra.models.config import TransformerConfig
from aiinfra.models.flash import steps
from aiinfra.models.presets import preset

from ._common import budget
from .attention_variants import GIB
from .transformer import LLAMA, llama_context

TILES_N, TILES_BLOCK = 2048, 128  # sequence and block length in the tiles question


def llama_matmul_parameters() -> int:
    """Psi of the 6 Psi rule for Llama 3 8B: weights that enter a matmul."""
    return flops.matmul_parameters(preset(LLAMA))


def llama_attention_flops_per_position() -> int:
    """12 L H d, Llama 3 8B's attention FLOPs per token and position attended."""
    return flops.attention_flops_per_token(preset(LLAMA), 1)


def llama_attention_parity_tokens() -> float:
    """Sequence length at which Llama 3 8B's attention FLOPs equal its 6 Psi."""
    return 6 * llama_matmul_parameters() / llama_attention_flops_per_position()


def llama_heads() -> int:
    """Query heads of Llama 3 8B."""
    return preset(LLAMA).n_heads


def llama_layers() -> int:
    """Layers of Llama 3 8B."""
    return preset(LLAMA).n_layers


def llama_bf16_weights_gb() -> float:
    """Llama 3 8B's weights in bf16, GB."""
    return budget(LLAMA, "H100").weight_bytes / 1e9


def _kv_tokens_fitting(c: TransformerConfig) -> int:
    return kv_budget.kv_budget(c, GPUS["H100"]).tokens


def llama_kv_tokens_fitting() -> int:
    """Tokens of bf16 KV cache that fit on an H100 next to Llama 3 8B's weights."""
    return _kv_tokens_fitting(preset(LLAMA))


def llama_mha_kv_tokens_fitting() -> int:
    """Tokens next to the same weights had Llama 3 8B one KV head per query head."""
    c = preset(LLAMA)
    mha = dataclasses.replace(c, n_kv_heads=c.n_heads)
    gqa = kv_budget.kv_budget(c, GPUS["H100"])
    return gqa.free_bytes // kv_budget.kv_budget(mha, GPUS["H100"]).bytes_per_token


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
    """T_r, blocks of TILES_BLOCK in TILES_N positions."""
    return -(-TILES_N // TILES_BLOCK)


@functools.cache
def _tiles(causal: bool) -> list[steps.TileStep]:
    return steps.tile_steps(TILES_N, TILES_BLOCK, TILES_BLOCK, causal)[1:]


def causal_tiles_computed() -> int:
    """Tiles causal tiled_forward computes, T = TILES_N, blocks of TILES_BLOCK."""
    return len(_tiles(causal=True))


def full_tiles_computed() -> int:
    """Tiles non-causal tiled_forward computes, the same sizes."""
    return len(_tiles(causal=False))


def causal_tiles_masked() -> int:
    """Of the causal tiles, those that cross the diagonal and are masked."""
    return len(_tiles(causal=True)[-1].masked)
