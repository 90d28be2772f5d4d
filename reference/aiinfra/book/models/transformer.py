"""What ``docs/models/transformer.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from dataclasses import replace

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.models import flops
from aiinfra.models.attention import flops as attention_flops
from aiinfra.models.hf import checkpoint_check
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.report import Table

LLAMA, DEEPSEEK, MISTRAL = "llama-3-8b", "deepseek-v2", "mistral-7b"
# Jiang et al. 2023, Table 1: context_len 8192 (v0.1). Its config.json allows 32768
# positions; the 32K context came with v0.2, which dropped the sliding window.
MISTRAL_CONTEXT = 8192


SEQ_LEN = 8192  # tokens of the FLOPs example


def checkpoint_equivalence_table() -> Table:
    """Our model against transformers on saved tiny checkpoints, per family.

    Measured by ``aiinfra bench hf-checkpoints --stamp``: the book saves none.
    """
    return checkpoint_check.equivalence_table(
        results.load(checkpoint_check.KIND, "cpu")
    )


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


def flops_conventions_table() -> Table:
    """Attention counted over the full square (MFU) and as kernels compute it."""
    table = attention_flops.conventions_table(seq_len=SEQ_LEN)
    return replace(table, words=(0, 3))  # 3: the kernel's mask


def attention_share_figure() -> Figure:
    """Attention share of training FLOPs against T, per convention."""
    return attention_flops.share_figure()


def llama_attention_share_executed() -> float:
    """Attention share of Llama 3 8B's training FLOPs at 8192 tokens, causal kernel."""
    c = preset(LLAMA)
    six_n = 6 * flops.matmul_parameters(c)
    done = attention_flops.attention_training_flops(c, SEQ_LEN, "causal")
    return done / (six_n + done)


def mistral_window() -> int:
    """W, Mistral 7B's sliding window."""
    return preset(MISTRAL).sliding_window


def mistral_window_saving() -> float:
    """Causal over sliding-window attention FLOPs of Mistral 7B at its context."""
    c = preset(MISTRAL)
    T = MISTRAL_CONTEXT
    causal = attention_flops.attention_training_flops(c, T, "causal")
    return causal / attention_flops.attention_training_flops(c, T, "window")


def mistral_context() -> int:
    """Mistral 7B's context length, as its paper's Table 1 gives it."""
    return MISTRAL_CONTEXT


def mistral_config_positions() -> int:
    """Positions of v0.1's ``config.json`` (``max_position_embeddings``)."""
    return preset(MISTRAL).max_seq_len
