"""What ``docs/training/context_parallel.rst`` shows: its values, tables, figures.

The running example is one attention layer of Llama 3 8B (``H = 32`` query heads,
``G = 8`` key/value heads, ``d = 128``) on a 128K-token sequence in bf16, on H100s
whose links are those of :data:`aiinfra.parallel.data.overlap.H100_LINKS`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.memory.calculator import GB, estimate_memory
from aiinfra.models.flops import attention_flops_per_token, training_flops_per_token
from aiinfra.models.presets import preset
from aiinfra.parallel.context import cost, figures
from aiinfra.parallel.data.overlap import H100_LINKS
from aiinfra.report import Table

CP_MODEL = "llama-3-8b"
CP_SEQ = 131072  # 128K tokens, Llama 3's longest context
CP_TP = 8  # tensor parallelism over the 8 GPUs of a node, with sequence parallelism
CP_ZERO, CP_DP = 1, 8  # ZeRO stage 1 over 8 data-parallel ranks (the memory page's)
CP_RANKS = 8  # context-parallel ranks of the timeline and the table
CP_SHORT_SHARD, CP_LONG_SHARD = 4096, 16384  # T/p of the timeline's two panels
CP_FIGURE_RANKS = 4  # p of the chunk grids


def _shape() -> cost.AttentionShape:
    c = preset(CP_MODEL)
    return cost.AttentionShape(1, c.n_heads, c.n_kv_heads, c.head_dim)


def cp_size(name: str) -> int:
    """``H``, ``G`` or ``d`` of the example's attention layer."""
    s = _shape()
    return {"H": s.heads, "G": s.kv_heads, "d": s.head_dim}[name]


def cp_memory_gb(cp: int = 1, seq: int = CP_SEQ) -> float:
    """Training memory per GPU (GB) with ``cp`` context-parallel ranks."""
    est = estimate_memory(
        preset(CP_MODEL),
        seq // cp,
        tp=CP_TP,
        sp=True,
        attention="flash",
        zero=CP_ZERO,
        dp=CP_DP,
    )
    return est.total / GB


def cp_hbm_gb() -> float:
    """The H100's memory, GB (decimal, as the datasheet prints it)."""
    return GPUS["H100"].hbm_bytes / GB


def cp_attention_share(seq: int = CP_SEQ) -> float:
    """Share of a training step's matmul FLOPs spent in attention scores at ``seq``."""
    c = preset(CP_MODEL)
    return attention_flops_per_token(c, seq) / training_flops_per_token(c, seq)


def cp_memory_figure() -> Figure:
    """Memory per GPU against sequence length for CP = 1, 2, 4, 8."""
    return figures.memory_vs_sequence_figure(
        preset(CP_MODEL),
        CP_TP,
        (1, 2, 4, 8),
        tuple(2**k for k in range(13, 21)),
        CP_ZERO,
        CP_DP,
        cp_hbm_gb(),
    )


def cp_ring_steps_figure() -> Figure:
    """The ring step at which each block of the causal score matrix is computed."""
    return figures.ring_steps_figure(CP_FIGURE_RANKS)


def cp_load_balance_figure() -> Figure:
    """Contiguous against zig-zag sharding: owners and work per step."""
    return figures.load_balance_figure(CP_FIGURE_RANKS)


def cp_efficiency(layout: str, p: int = CP_RANKS) -> float:
    """Busy share of the ranks when every ring step waits for its slowest rank."""
    return cost.ring_efficiency(p, layout)


def cp_overlap_shard(link: str, causal: bool = True) -> float:
    """Shortest shard ``T/p`` whose ring transfers hide behind compute (tokens)."""
    return cost.overlap_shard(_shape(), link, causal)


def cp_link_gbps(link: str) -> float:
    """Bandwidth of a link in each direction, GB/s."""
    return H100_LINKS[link].bandwidth / 1e9


def cp_step_ms(which: str, shard: int = CP_SHORT_SHARD, link: str = "nic400") -> float:
    """One forward ring step at shard length ``shard``: ``compute`` or ``transfer``."""
    compute, transfer = cost.step_times(_shape(), shard, link)
    return 1e3 * (compute if which == "compute" else transfer)


def cp_exposed_ms(shard: int = CP_SHORT_SHARD, link: str = "nic400") -> float:
    """Forward time of the ring not covered by compute, ms."""
    compute, transfer = cost.step_times(_shape(), shard, link)
    end = cost.ring_timeline(compute, transfer, CP_RANKS)[-1][1]
    return 1e3 * (end - CP_RANKS * compute)


def cp_timeline_figure() -> Figure:
    """The forward ring of one layer over InfiniBand, below and above the bound."""
    return figures.ring_timeline_figure(
        _shape(), CP_RANKS, "nic400", (CP_SHORT_SHARD, CP_LONG_SHARD)
    )


def cp_ulysses_figure() -> Figure:
    """Who holds which heads and positions before and after Ulysses' all-to-all."""
    return figures.ulysses_layout_figure(CP_FIGURE_RANKS, 8)


def cp_comparison_table() -> Table:
    """Ring attention against Ulysses for the example layer."""
    return figures.comparison_table(_shape(), CP_SEQ, CP_RANKS)


def cp_volume_figure() -> Figure:
    """Bytes per rank and layer against p, ring and Ulysses."""
    return figures.volume_vs_ranks_figure(_shape(), CP_SEQ, (2, 4, 8, 16, 32, 64))


def cp_volume_ratio(p: int = CP_RANKS) -> float:
    """Ring bytes over Ulysses bytes, forward, for the example layer at ``p``."""
    ring = cost.ring_bytes(_shape(), CP_SEQ, p)["forward"]
    return ring / cost.ulysses_bytes(_shape(), CP_SEQ, p)["forward"]


def cp_mib(method: str, phase: str, p: int = CP_RANKS) -> float:
    """MiB one rank sends per layer: ``method`` ring or ulysses, ``phase``."""
    sent = cost.ring_bytes if method == "ring" else cost.ulysses_bytes
    return sent(_shape(), CP_SEQ, p)[phase] / figures.MIB
