"""What ``docs/models/decoding.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.hardware import GPUS
from aiinfra.models import (
    kv_budget,
    split_kv,
)
from aiinfra.models.presets import preset
from aiinfra.report import Table

from .transformer import LLAMA, SEQ_LEN


def kv_budget_table() -> Table:
    """Tokens of KV cache that fit next to the weights, Llama 3 8B and 70B."""
    return kv_budget.kv_budget_table(context=SEQ_LEN)


def kv_budget_figure() -> Figure:
    """Tokens of KV cache against the tensor-parallel group size."""
    return kv_budget.kv_budget_figure()


def _budget(name: str, gpu: str, n: int = 1) -> kv_budget.KVBudget:
    return kv_budget.kv_budget(preset(name), GPUS[gpu], n)


def llama_h100_kv_tokens() -> int:
    """Tokens of bf16 cache that fit on one H100 next to Llama 3 8B."""
    return _budget(LLAMA, "H100").tokens


def llama_h100_sequences() -> int:
    """Sequences of 8192 tokens that fit on one H100 next to Llama 3 8B."""
    return llama_h100_kv_tokens() // SEQ_LEN


def llama70_weights_gb() -> float:
    """Llama 3 70B's bf16 weights, GB."""
    return _budget("llama-3-70b", "H100").weight_bytes / 1e9


def llama70_min_h100s() -> int:
    """Smallest power-of-two group of H100s that holds Llama 3 70B and some cache."""
    n = 1
    while _budget("llama-3-70b", "H100", n).tokens == 0:
        n *= 2
    return n


def llama70_two_h100_sequences() -> int:
    """Sequences of 8192 tokens on two H100s next to Llama 3 70B."""
    return _budget("llama-3-70b", "H100", 2).tokens // SEQ_LEN


def llama70_four_h100_sequences() -> int:
    """Sequences of 8192 tokens on four H100s next to Llama 3 70B."""
    return _budget("llama-3-70b", "H100", 4).tokens // SEQ_LEN


def h100_sms() -> int:
    """Streaming multiprocessors of an H100 SXM."""
    return GPUS["H100"].sms


def llama_splits_to_fill() -> int:
    """KV chunks that give every H100 SM a program, one Llama 3 8B sequence."""
    return split_kv.splits_to_fill(1, preset(LLAMA).n_kv_heads, h100_sms())


def llama_kv_heads() -> int:
    """Key/value heads of Llama 3 8B."""
    return preset(LLAMA).n_kv_heads
