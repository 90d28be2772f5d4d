"""Pictures of tensor parallelism: the plan on a block, heads on ranks, memory, cost.

Each figure draws data: the plan (:data:`~aiinfra.parallel.tensor.model.
MEGATRON_PLAN`), the head layout rule of
:mod:`~aiinfra.parallel.tensor.attention`, the memory formulas of
:mod:`aiinfra.memory.activations`, and the cost model of
:mod:`~aiinfra.parallel.tensor.cost`. Nothing here is measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from aiinfra.comm import cost
from aiinfra.memory.activations import activation_bytes_per_layer
from aiinfra.models.config import TransformerConfig
from aiinfra.parallel.tensor.attention import check_heads
from aiinfra.parallel.tensor.cost import layer_cost
from aiinfra.report import mark_names

STYLE_COLOURS = {
    "colwise": "#6baed6",
    "rowwise": "#fd8d3c",
    "vocab": "#74c476",
    "sequence": "#bcbddc",
    "replicated": "#d9d9d9",
}
RANK_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")

# What a figure calls a link of the alpha-beta model (its key is a code name).
_LINK_NAMES = {
    "nvlink": "NVLink",
    "h100-nvlink": "NVLink 4",
    "ib400": "400G InfiniBand",
    "ib100": "100G InfiniBand",
}

# The modules of one block, bottom to top, and the operator at each boundary.
_BLOCK = (
    ("embed", "embed"),
    ("g", None),
    ("blocks.0.attn_norm", "attn_norm"),
    ("f", None),
    ("blocks.0.attn.wq", "wq, wk, wv"),
    ("attention", "attention (H/p heads)"),
    ("blocks.0.attn.wo", "wo"),
    ("g", None),
    ("blocks.0.mlp_norm", "mlp_norm"),
    ("f", None),
    ("blocks.0.mlp.w1", "w1, w3"),
    ("blocks.0.mlp.w2", "w2"),
    ("g", None),
    ("norm", "norm"),
    ("f", None),
    ("head", "head + loss"),
)
# The labels that are the model's module names: drawn as code, never translated.
_MODULE_LABELS = frozenset(
    ("embed", "attn_norm", "wq, wk, wv", "wo", "mlp_norm", "w1, w3", "w2", "norm")
)


def plan_figure(plans: Sequence[tuple[str, dict[str, str]]]) -> Figure:
    """One column per plan: the block's modules coloured by style, with f and g.

    Args:
        plans: (title, resolved plan) pairs; a resolved plan maps module names of a
            one-layer model to styles (:func:`~aiinfra.parallel.
            tensor_parallel_model.resolve_plan`).
    """
    fig = Figure(figsize=(6.4, 5.2), layout="constrained")
    axes = fig.subplots(1, len(plans), squeeze=False)[0]
    for ax, (title, styles) in zip(axes, plans, strict=True):
        sp = any(s == "sequence" for s in styles.values())
        y = 0.0
        for name, label in _BLOCK:
            if label is None:  # a communication operator between modules
                text = {"f": "all-gather" if sp else "f", "g": "reduce-scatter"}
                op = text[name] if sp else name
                ax.text(
                    0.5,
                    y + 0.25,
                    op,
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="#b2182b",
                    style="italic",
                )
                y += 0.5
                continue
            style = "colwise" if name == "attention" else styles.get(name, "replicated")
            box = FancyBboxPatch((0.1, y + 0.05), 0.8, 0.7, "round,pad=0.02")
            ax.add_patch(box).set(facecolor=STYLE_COLOURS[style], lw=0.5)
            code = {"family": "monospace"} if label in _MODULE_LABELS else {}
            ax.text(0.5, y + 0.4, label, ha="center", va="center", fontsize=8, **code)
            y += 0.9
        ax.set(xlim=(0, 1), ylim=(0, y), title=title)
        ax.axis("off")
    handles = [
        FancyBboxPatch((0, 0), 1, 1, facecolor=c, lw=0) for c in STYLE_COLOURS.values()
    ]
    fig.legend(handles, list(STYLE_COLOURS), loc="outside right center", fontsize=8)
    return mark_names(fig, _MODULE_LABELS)


def heads_figure(n_heads: int, n_kv_heads: int, p: int) -> Figure:
    """Query heads (top) and the KV heads they read (bottom), coloured by rank.

    Raises:
        ValueError: ``p`` does not divide ``n_heads`` and ``n_kv_heads``.
    """
    check_heads(n_heads, n_kv_heads, p)
    fig = Figure(figsize=(6.4, 2.2), layout="constrained")
    ax = fig.add_subplot()
    group = n_heads // n_kv_heads
    for i in range(n_heads):
        rank = i // (n_heads // p)
        kv = i // group
        x_kv = (kv + 0.5) * n_heads / n_kv_heads - 0.5
        ax.plot([i, x_kv], [1.0, 0.0], color=RANK_COLOURS[rank], lw=0.8)
        ax.scatter([i], [1.0], s=90, color=RANK_COLOURS[rank], zorder=3)
    for j in range(n_kv_heads):
        rank = j // (n_kv_heads // p)
        x = (j + 0.5) * n_heads / n_kv_heads - 0.5
        ax.scatter([x], [0.0], s=160, marker="s", color=RANK_COLOURS[rank], zorder=3)
    ax.set_yticks([0, 1], ["KV heads", "query heads"])
    ax.set_xticks([])
    ax.set_ylim(-0.4, 1.4)
    ax.set_title(f"H = {n_heads}, G = {n_kv_heads}, p = {p}: colour = rank")
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    return fig


def logits_figure(seq: int, vocab: int, ps: Sequence[int]) -> Figure:
    """GB of fp32 logits per rank for one sequence, against the TP size ``p``."""
    fig = Figure(figsize=(6.4, 2.8), layout="constrained")
    ax = fig.add_subplot()
    gb = [4 * seq * vocab / p / 1e9 for p in ps]
    ax.bar([str(p) for p in ps], gb, color=STYLE_COLOURS["vocab"])
    for i, v in enumerate(gb):
        ax.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("tensor-parallel ranks p")
    ax.set_ylabel("logits per rank (GB)")
    return fig


def activations_figure(
    c: TransformerConfig, seq: int, ps: Sequence[int], micro_batch: int = 1
) -> Figure:
    """Activation GB per layer and rank against ``p``: TP alone, and TP + SP."""
    fig = Figure(figsize=(6.4, 3.0), layout="constrained")
    ax = fig.add_subplot()
    h, a = c.d_model, c.n_heads
    for sp, label, colour in ((False, "TP", "#6baed6"), (True, "TP + SP", "#756bb1")):
        gb = [
            activation_bytes_per_layer(seq, micro_batch, h, a, p, sp, "selective") / 1e9
            for p in ps
        ]
        ax.plot(ps, gb, marker="o", label=label, color=colour)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ps), [str(p) for p in ps])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("tensor-parallel ranks p")
    ax.set_ylabel("activations per layer (GB)")
    ax.legend()
    return fig


def comm_share_figure(
    c: TransformerConfig,
    ps: Sequence[int],
    tokens: int,
    seq: int,
    peak_flops: float,
    links: Sequence[str],
) -> Figure:
    """Share of a layer's time in TP collectives against ``p``, one line per link."""
    fig = Figure(figsize=(6.4, 3.0), layout="constrained")
    ax = fig.add_subplot()
    for link in links:
        share = [layer_cost(c, p, tokens, seq, peak_flops, link).comm_share for p in ps]
        beta = 1 / cost.get_link(link).beta / 1e9
        ax.plot(
            ps,
            [100 * s for s in share],
            marker="o",
            label=f"{_LINK_NAMES.get(link, link)} ({beta:.0f} GB/s)",
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ps), [str(p) for p in ps])
    ax.set_ylim(0, 100)
    ax.set_xlabel("tensor-parallel ranks p")
    ax.set_ylabel("communication share (%)")
    ax.legend()
    return fig
