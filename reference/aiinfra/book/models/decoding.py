"""What ``docs/models/decoding.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.comm.cost import LINKS, ring_all_reduce_time
from aiinfra.infer.step_cost import decode_step_bytes
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


# Tensor-parallel decode at batch 1

TP_MODELS = ("llama-3-8b", "llama-3-70b")
TP_GPU, TP_LINK = "H100", "h100-nvlink"  # one NVLink domain, the book's link table
TP_GROUPS = (1, 2, 4, 8, 16, 32, 64)  # GPUs per tensor-parallel group
TP_CONTEXT = 1024  # cached tokens of the one sequence decoded
TP_BYTES = 2  # bf16 activations in the all-reduces
_TP_NAMES = {"llama-3-8b": "Llama 3 8B", "llama-3-70b": "Llama 3 70B"}


def _tp_terms(name: str, p: int, batch: int = 1) -> tuple[float, float]:
    """Seconds of one decode step on ``p`` GPUs: (HBM reads, all-reduces).

    Each GPU reads ``1/p`` of the weights and ``1/min(p, G)`` of the cache (its key/
    value heads); each layer all-reduces the attention's and the MLP's output,
    ``batch x d_model`` activations each, over the ring of the link table.
    """
    c, gpu = preset(name), GPUS[TP_GPU]
    weights = decode_step_bytes(c, batch, 0)  # the weights, and one token's K and V
    cache = decode_step_bytes(c, batch, TP_CONTEXT) - weights
    memory = (weights / p + cache / min(p, c.n_kv_heads)) / gpu.hbm_bandwidth
    n = batch * c.d_model * TP_BYTES
    comm = 2 * c.n_layers * ring_all_reduce_time(n, p, TP_LINK) if p > 1 else 0.0
    return memory, comm


def tp_step_ms(name: str, p: int) -> float:
    """Modelled decode step at batch 1 on ``p`` GPUs of one NVLink domain, ms."""
    return 1e3 * sum(_tp_terms(name, p))


def tp_comm_ms(name: str, p: int) -> float:
    """The step's two all-reduces per layer on ``p`` GPUs, ms."""
    return 1e3 * _tp_terms(name, p)[1]


def tp_all_reduce_us(p: int = 8, name: str = "llama-3-70b") -> float:
    """One all-reduce of a token's ``d_model`` bf16 activations on ``p`` GPUs, us."""
    return 1e6 * ring_all_reduce_time(preset(name).d_model * TP_BYTES, p, TP_LINK)


def tp_alpha_share(p: int = 8, name: str = "llama-3-70b") -> float:
    """Share of that all-reduce spent in its per-message latency ``2 (p-1) alpha``."""
    alpha = LINKS[TP_LINK].alpha
    return 2 * (p - 1) * alpha / (tp_all_reduce_us(p, name) * 1e-6)


def tp_best_group(name: str) -> int:
    """The group of :data:`TP_GROUPS` with the shortest modelled step."""
    return min(TP_GROUPS, key=lambda p: tp_step_ms(name, p))


def tp_decode_figure() -> Figure:
    """Decode step at batch 1 against the group size, for Llama 3 8B and 70B."""
    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    ax = fig.subplots()
    for i, name in enumerate(TP_MODELS):
        groups = [p for p in TP_GROUPS if budget(name, TP_GPU, p).tokens > 0]
        total = [tp_step_ms(name, p) for p in groups]
        shared = [p for p in groups if p > 1]  # one GPU has no all-reduce
        comm = [tp_comm_ms(name, p) for p in shared]
        ax.plot(groups, total, "o-", color=f"C{i}", label=_TP_NAMES[name])
        ax.plot(shared, comm, "s--", color=f"C{i}", alpha=0.6)
        best = tp_best_group(name)
        ax.plot(best, tp_step_ms(name, best), "*", color="k", markersize=12)
    ax.plot([], [], "k-", label="step")
    ax.plot([], [], "k--", alpha=0.6, label="all-reduces")
    ax.plot([], [], "k*", ls="", markersize=10, label="fastest group")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(TP_GROUPS, [str(p) for p in TP_GROUPS])
    ax.set_xlabel("GPUs in the tensor-parallel group")
    ax.set_ylabel("decode step (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
