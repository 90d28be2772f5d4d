"""What ``docs/models/decoding.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.models import kv_budget
from aiinfra.models.flash import split_kv
from aiinfra.models.presets import preset
from aiinfra.report import Table

from ._common import budget
from .transformer import LLAMA, SEQ_LEN


def kv_budget_table() -> Table:
    """Tokens of KV cache that fit next to the weights, Llama 3 8B and 70B."""
    return kv_budget.kv_budget_table(context=SEQ_LEN)


def kv_budget_figure() -> Figure:
    """Tokens of KV cache against the tensor-parallel group size."""
    return kv_budget.kv_budget_figure()


def llama_h100_kv_tokens() -> int:
    """Tokens of bf16 cache that fit on one H100 next to Llama 3 8B."""
    return budget(LLAMA, "H100").tokens


def llama_h100_sequences() -> int:
    """Sequences of 8192 tokens that fit on one H100 next to Llama 3 8B."""
    return llama_h100_kv_tokens() // SEQ_LEN


def llama70_weights_gb() -> float:
    """Llama 3 70B's bf16 weights, GB."""
    return budget("llama-3-70b", "H100").weight_bytes / 1e9


def llama70_min_h100s() -> int:
    """Smallest power-of-two group of H100s that holds Llama 3 70B and some cache."""
    n = 1
    while budget("llama-3-70b", "H100", n).tokens == 0:
        n *= 2
    return n


def llama70_two_h100_sequences() -> int:
    """Sequences of 8192 tokens on two H100s next to Llama 3 70B."""
    return budget("llama-3-70b", "H100", 2).tokens // SEQ_LEN


def llama70_four_h100_sequences() -> int:
    """Sequences of 8192 tokens on four H100s next to Llama 3 70B."""
    return budget("llama-3-70b", "H100", 4).tokens // SEQ_LEN


def llama70_tokens_16_over_8() -> float:
    """Tokens of cache on 16 H100s over 8, Llama 3 70B (8 KV heads)."""
    return (
        budget("llama-3-70b", "H100", 16).tokens
        / budget("llama-3-70b", "H100", 8).tokens
    )


def llama70_kv_heads() -> int:
    """Llama 3 70B's key/value heads, ``G``."""
    return preset("llama-3-70b").n_kv_heads


def h100_sms() -> int:
    """Streaming multiprocessors of an H100 SXM."""
    return GPUS["H100"].sms


def llama_splits_to_fill() -> int:
    """KV chunks that give every H100 SM a program, one Llama 3 8B sequence."""
    return split_kv.splits_to_fill(1, preset(LLAMA).n_kv_heads, h100_sms())


def llama_kv_heads() -> int:
    """Key/value heads of Llama 3 8B."""
    return preset(LLAMA).n_kv_heads


MAX_SPLITS = 40  # chunks drawn in the split-KV figure: past 2 x 17, the waves repeat


def split_kv_figure() -> Figure:
    """Wave efficiency and modelled step time against chunks, Llama 3 8B, H100."""
    return split_kv.split_kv_figure(1, llama_kv_heads(), h100_sms(), MAX_SPLITS)


def llama_fill_programs() -> int:
    """Programs of one Llama 3 8B sequence split into llama_splits_to_fill chunks."""
    return llama_kv_heads() * llama_splits_to_fill()


def llama_splits_by_efficiency() -> int:
    """Chunks FlashAttention-2's heuristic picks for one Llama 3 8B sequence."""
    return split_kv.splits_by_efficiency(1, llama_kv_heads(), h100_sms())


def llama_efficiency_at_heuristic() -> float:
    """Wave efficiency of the heuristic's chunk count, one sequence, H100."""
    n = llama_splits_by_efficiency()
    return split_kv.wave_efficiency(llama_kv_heads() * n, h100_sms())


def llama_time_at_fill() -> float:
    """Modelled step time at llama_splits_to_fill chunks, over the unsplit step."""
    return split_kv.split_step_time(
        1, llama_kv_heads(), h100_sms(), llama_splits_to_fill()
    )


def llama_time_one_wave() -> float:
    """Modelled step time at the most chunks that fit one wave, over unsplit."""
    n = h100_sms() // llama_kv_heads()
    return split_kv.split_step_time(1, llama_kv_heads(), h100_sms(), n)


def llama_chunks_one_wave() -> int:
    """The most chunks of one Llama 3 8B sequence that run in one H100 wave."""
    return h100_sms() // llama_kv_heads()


def fa2_share() -> float:
    """Share of the best wave efficiency FlashAttention-2's heuristic accepts."""
    return split_kv.FA2_SHARE
