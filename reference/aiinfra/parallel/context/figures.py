"""The figures and the table of the context-parallelism page, from the code's own rules.

Which block of the causal score matrix a rank computes, and at which ring step, comes
from :func:`~aiinfra.parallel.context.ring_attention.chunk_ids` and
:func:`~aiinfra.parallel.context.ring_attention.block_kind`, the functions the ring
runs; the timeline and the volumes from :mod:`aiinfra.parallel.context.cost`; the memory
per GPU from the memory chapter's calculator
(:func:`~aiinfra.memory.calculator.estimate_memory`).
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from aiinfra.memory.calculator import GB, estimate_memory
from aiinfra.models.config import TransformerConfig
from aiinfra.parallel.context import cost
from aiinfra.parallel.context.zigzag import block_kind, chunk_ids
from aiinfra.report import Table

MIB = 2**20
LAYOUTS_SHOWN = ("contiguous", "zigzag")


def block_owner_grid(p: int, layout: str, by: str = "rank") -> np.ndarray:
    """The ``2p x 2p`` chunk grid of a causal score matrix: who computes each block.

    Args:
        p: ranks.
        layout: ``"zigzag"`` or ``"contiguous"``.
        by: ``"rank"`` (the rank holding the query chunk) or ``"step"`` (the ring
            step at which its key chunk arrives there).

    Returns:
        ``grid[i, j]`` for query chunk ``i`` and key chunk ``j``; NaN where masked.
    """
    grid = np.full((2 * p, 2 * p), np.nan)
    for r in range(p):
        for t in range(p):
            for i in chunk_ids(r, p, layout):
                for j in chunk_ids((r - t) % p, p, layout):
                    if block_kind(i, j, causal=True) != "skip":
                        grid[i, j] = r if by == "rank" else t
    return grid


def _grid(ax: Axes, grid: np.ndarray, title: str, label: str) -> None:
    n = grid.shape[0]
    cmap = "viridis" if label == "step" else "tab10"
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=np.nanmax(grid) if label == "step" else 9)
    for i in range(n):
        for j in range(n):
            if not np.isnan(grid[i, j]):
                ax.text(
                    j,
                    i,
                    int(grid[i, j]),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                )
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("key chunk")
    ax.set_ylabel("query chunk")
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))


def ring_steps_figure(p: int = 4) -> Figure:
    """The causal score matrix of a zig-zag ring: the step computing each block."""
    fig = Figure(figsize=(4.2, 3.8), layout="constrained")
    ax = fig.subplots()
    _grid(ax, block_owner_grid(p, "zigzag", "step"), f"ring step, p = {p}", "step")
    return fig


def load_balance_figure(p: int = 4) -> Figure:
    """Contiguous against zig-zag: who computes each block, and the work per step."""
    fig = Figure(figsize=(9.5, 3.4), layout="constrained")
    axes = fig.subplots(1, 3, width_ratios=[1, 1, 1.3])
    for ax, layout in zip(axes[:2], LAYOUTS_SHOWN, strict=True):
        _grid(ax, block_owner_grid(p, layout), f"{layout}: rank", "rank")
    ax = axes[2]
    steps = np.arange(p)
    for layout, style in zip(LAYOUTS_SHOWN, ("s--", "o-"), strict=True):
        work = np.array(cost.rank_work(p, layout))  # (p ranks, p steps)
        ax.plot(steps, work.max(axis=0), style, label=f"{layout}: slowest rank")
        ax.plot(steps, work.mean(axis=0), ":", color="gray")
    ax.set_xlabel("ring step")
    ax.set_ylabel("blocks computed (chunk$^2$ units)")
    ax.set_xticks(steps)
    ax.set_ylim(0, 4.5)
    ax.legend(fontsize=7, title="dotted: mean over ranks", title_fontsize=7)
    return fig


def memory_vs_sequence_figure(
    cfg: TransformerConfig,
    tp: int,
    cps: tuple[int, ...],
    seqs: tuple[int, ...],
    zero: int,
    dp: int,
    hbm_gb: float,
) -> Figure:
    """Training memory per GPU against sequence length, one line per CP size.

    Each context-parallel rank holds ``T / p`` positions, so its activations are
    those of a ``T / p`` sequence; the model states do not change.
    """
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.subplots()
    for cp in cps:
        total = [
            estimate_memory(
                cfg, seq // cp, tp=tp, sp=True, attention="flash", zero=zero, dp=dp
            ).total
            / GB
            for seq in seqs
        ]
        ax.plot(seqs, total, "o-", label=f"CP = {cp}")
    ax.axhline(hbm_gb, color="black", linestyle="--", linewidth=0.9)
    ax.annotate(f"{hbm_gb:.0f} GB HBM", (seqs[0], hbm_gb * 1.08), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(seqs, [f"{s // 1024}K" for s in seqs])
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("memory per GPU (GB)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def ring_timeline_figure(
    shape: cost.AttentionShape, p: int, link: str, shards: tuple[int, ...]
) -> Figure:
    """Forward ring steps: compute and transfer lanes, one panel per shard length."""
    fig = Figure(figsize=(8, 1.4 + 1.3 * len(shards)), layout="constrained")
    axes = fig.subplots(len(shards), 1, squeeze=False)[:, 0]
    for ax, shard in zip(axes, shards, strict=True):
        compute, transfer = cost.step_times(shape, shard, link)
        steps = cost.ring_timeline(compute, transfer, p)
        ms = 1e3
        for t, (c0, c1, x0, x1) in enumerate(steps):
            ax.broken_barh([(c0 * ms, (c1 - c0) * ms)], (1, 0.8), color="tab:blue")
            ax.text(
                (c0 + c1) / 2 * ms,
                1.4,
                str(t),
                ha="center",
                va="center",
                color="white",
                fontsize=7,
            )
            if x1 > x0:
                ax.broken_barh(
                    [(x0 * ms, (x1 - x0) * ms)],
                    (0, 0.8),
                    color="tab:orange",
                    edgecolor="white",
                )
        end = steps[-1][1] * ms
        ax.axvline(p * compute * ms, color="gray", linestyle=":", linewidth=1)
        ax.set_yticks([0.4, 1.4], ["K/V transfer", "compute"])
        ax.set_xlim(0, end * 1.02)
        ax.set_title(f"T/p = {shard:,} tokens per rank", fontsize=9)
    axes[-1].set_xlabel("time (ms)")
    return fig


def ulysses_layout_figure(p: int = 4, heads: int = 8) -> Figure:
    """Who holds which (head, position block) before and after the all-to-all."""
    fig = Figure(figsize=(7, 2.8), layout="constrained")
    before = np.repeat(np.arange(p)[None, :], heads, axis=0)  # (H, p blocks): seq
    after = np.repeat(np.arange(p)[:, None], heads // p, axis=0) * np.ones((1, p))
    for ax, grid, title in zip(
        fig.subplots(1, 2),
        (before, after),
        ("sequence shards (input)", "head shards (attention)"),
        strict=True,
    ):
        ax.imshow(grid, cmap="tab10", vmin=0, vmax=9, aspect="auto")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("position block (T/p each)")
        ax.set_ylabel("head")
        ax.set_xticks(range(p))
        ax.set_yticks(range(heads))
        for i in range(heads):
            for j in range(p):
                ax.text(
                    j,
                    i,
                    f"r{int(grid[i, j])}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                )
    return fig


def volume_vs_ranks_figure(
    shape: cost.AttentionShape, seq: int, ranks: tuple[int, ...]
) -> Figure:
    """Bytes per rank and layer, forward + backward, of ring attention and Ulysses."""
    fig = Figure(figsize=(6, 3.4), layout="constrained")
    ax = fig.subplots()
    ring = [sum(cost.ring_bytes(shape, seq, p).values()) / MIB for p in ranks]
    ax.plot(ranks, ring, "o-", label="ring attention")
    ok = [p for p in ranks if shape.kv_heads % p == 0]
    uly = [sum(cost.ulysses_bytes(shape, seq, p).values()) / MIB for p in ok]
    ax.plot(ok, uly, "s-", label=f"Ulysses (p divides G = {shape.kv_heads})")
    G, H = shape.kv_heads, shape.heads
    more = [p for p in ranks if p >= G and p % G == 0 and H % p == 0]  # p > G: repeat
    rep = [sum(cost.ulysses_bytes(shape, seq, p).values()) / MIB for p in more]
    ax.plot(
        more, rep, "s--", color="C1", alpha=0.6, label="Ulysses, K/V heads repeated"
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks, [str(p) for p in ranks])
    ax.set_xlabel("context-parallel ranks p")
    ax.set_ylabel("MiB sent per rank per layer")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def comparison_table(shape: cost.AttentionShape, seq: int, p: int) -> Table:
    """Ring attention against Ulysses: traffic, memory and limits, for one layer."""
    ring, uly = cost.ring_bytes(shape, seq, p), cost.ulysses_bytes(shape, seq, p)
    mem = {
        m: cost.attention_elements(shape, seq, p, m) * 2 / MIB
        for m in ("ring", "ulysses")
    }
    H, G = shape.heads, shape.kv_heads
    rows = [
        ["sent forward (formula)", "(p-1) 2BG(T/p)d w", "(p-1)/p 2B(H+G)(T/p)d w"],
        [
            "sent backward (formula)",
            "(p-1) 2BG(T/p)d w + p 2BG(T/p)d w_acc",
            "(p-1)/p 2B(H+G)(T/p)d w",
        ],
        [
            "sent forward (MiB)",
            f"{ring['forward'] / MIB:,.0f}",
            f"{uly['forward'] / MIB:,.0f}",
        ],
        [
            "sent backward (MiB)",
            f"{ring['backward'] / MIB:,.0f}",
            f"{uly['backward'] / MIB:,.0f}",
        ],
        [
            "messages forward (ring: one per hop; Ulysses: 4 all-to-alls)",
            f"{p - 1}",
            f"{4 * (p - 1)}",
        ],
        ["attention tensors (MiB)", f"{mem['ring']:,.0f}", f"{mem['ulysses']:,.0f}"],
        [
            "heads p must divide (Ulysses: H, and G unless p is a multiple of G)",
            "-",
            "H, G",
        ],
        ["sequence length divisible by", "2p", "p"],
    ]
    return Table(
        ["", "ring attention", "Ulysses"],
        rows,
        note=(
            "Per rank and attention layer; w = 2 bytes (bf16), w_acc = 4 (fp32 "
            "gradient accumulators); attention tensors are q, k, v, o (and the "
            "arriving K/V block for the ring, the head-sharded copies for Ulysses)."
        ),
        stamp=f"B = {shape.batch}, H = {H}, G = {G}, d = {shape.head_dim}, "
        f"T = {seq:,}, p = {p}",
    )
