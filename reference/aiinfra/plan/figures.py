"""Pictures of the mesh and of the planner's answers.

The mesh figure draws every rank of a :class:`~aiinfra.plan.mesh.MeshLayout` as a
box in its node, once per dimension, coloured by the group it belongs to in that
dimension: consecutive boxes share a TP colour, DP colours repeat across nodes.
The step figure stacks the terms of :class:`~aiinfra.plan.cost.StepTime` for a few
plans beyond the compute they all share, so what each layout pays for (bubble,
exposed communication, recomputation) is visible at a readable scale. Every text
is either words or numbers, so the book can translate the words.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from aiinfra.plan.mesh import MESH_DIMS, MeshLayout
from aiinfra.plan.search import Plan
from aiinfra.plan.stage_profile import StageLoad

# Tableau 10: neighbouring groups get distinct colours, repeating after ten.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1")
PALETTE += ("#edc948", "#76b7b2", "#ff9da7", "#9c755f", "#bab0ac")
DIM_TITLES = {
    "tp": "tensor-parallel groups",
    "cp": "context-parallel groups",
    "pp": "pipeline groups",
    "dp": "data-parallel groups",
}
TERMS = {  # StepTime field -> (legend, colour); compute beyond the shared part
    "compute": ("extra compute", "#4e79a7"),
    "bubble": ("pipeline bubble", "#bab0ac"),
    "tp": ("TP all-reduces", "#f28e2b"),
    "cp": ("CP K/V exposed", "#59a14f"),
    "pp": ("PP sends", "#b07aa1"),
    "dp": ("DP exposed", "#e15759"),
}


def mesh_figure(layout: MeshLayout, font: int = 8) -> Figure:
    """One row per dimension (TP innermost first): ranks coloured by group.

    Args:
        layout: the mesh; its ranks are drawn node by node.
        font: base font size in points.

    Returns:
        The figure.
    """
    g, n = layout.gpus_per_node, layout.world_size
    nodes = max(1, n // g)
    dims = MESH_DIMS[::-1]  # tp, cp, pp, dp: innermost first
    fig = Figure(figsize=(7, 1.1 * len(dims) + 0.3), layout="constrained")
    for ax, dim in zip(fig.subplots(len(dims), 1), dims, strict=True):
        colour = {}
        for i, group in enumerate(layout.groups(dim)):
            for r in group:
                colour[r] = PALETTE[i % len(PALETTE)]
        for r in range(n):
            node, slot = divmod(r, g)
            x = node * (g + 0.6) + slot
            ax.add_patch(Rectangle((x, 0), 0.9, 0.9, color=colour[r]))
            ax.text(x + 0.45, 0.45, str(r), ha="center", va="center", fontsize=font)
        for node in range(nodes):
            x0 = node * (g + 0.6) - 0.15
            ax.add_patch(
                Rectangle((x0, -0.15), g + 0.2, 1.2, fill=False, lw=1, ec="#444444")
            )
        ax.set_xlim(-0.4, nodes * (g + 0.6))
        ax.set_ylim(-0.3, 1.2)
        ax.set_axis_off()
        size = getattr(layout, dim)
        ax.set_title(f"{DIM_TITLES[dim]} ({size})", fontsize=font + 1, loc="left")
    return fig


def step_terms_figure(
    plans: Sequence[Plan], labels: Sequence[str], font: int = 8
) -> Figure:
    """What each plan adds to the compute they share, stacked by term, and its MFU.

    Every plan computes at least ``min(compute)`` seconds (the ideal split of the
    same FLOPs); the bars show the rest: extra compute (recomputation, an uneven
    pipeline), the bubble and the exposed communication.

    Args:
        plans: the plans, drawn top to bottom.
        labels: one label per plan (its layout).
        font: base font size in points.

    Returns:
        The figure.
    """
    shared = min(p.time.compute for p in plans)
    fig = Figure(figsize=(7, 0.42 * len(plans) + 1.1), layout="constrained")
    ax = fig.subplots()
    for row, p in enumerate(plans):
        left = 0.0
        for field, (_, colour) in TERMS.items():
            width = getattr(p.time, field) - (shared if field == "compute" else 0)
            ax.barh(row, width, left=left, color=colour, height=0.7)
            left += width
        ax.text(left, row, f" {100 * p.time.mfu:.1f}%", va="center", fontsize=font)
    ax.set_yticks(range(len(plans)), list(labels), fontsize=font)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step beyond the shared compute", fontsize=font)
    ax.tick_params(axis="x", labelsize=font)
    right = max(p.time.step for p in plans) - shared
    ax.set_xlim(0, right * 1.2)
    handles = [Rectangle((0, 0), 1, 1, color=c) for _, c in TERMS.values()]
    fig.legend(
        handles,
        [name for name, _ in TERMS.values()],
        fontsize=font,
        ncol=6,
        loc="outside lower center",
        frameon=False,
        handlelength=1,
        columnspacing=1,
    )
    return fig


def stage_profile_figure(
    profiles: dict[str, Sequence[StageLoad]], hbm_gb: float | None = None
) -> Figure:
    """Work and memory per pipeline rank, one line per way of splitting the layers.

    Args:
        profiles: label -> :func:`~aiinfra.plan.stage_profile.stage_profile`.
        hbm_gb: the GPU's memory, drawn as a dashed line (``None``: no line).

    Returns:
        Two panels against the pipeline rank: training FLOPs in layers, and GB
        (10^9 bytes) per GPU.
    """
    fig = Figure(figsize=(9, 3.6), layout="constrained")
    work_ax, mem_ax = fig.subplots(1, 2)
    for (label, loads), marker in zip(profiles.items(), "os^", strict=False):
        ranks = [load.rank for load in loads]
        work_ax.plot(ranks, [load.work for load in loads], marker + "-", label=label)
        mem_ax.plot(ranks, [load.total / 1e9 for load in loads], marker + "-")
    if hbm_gb is not None:
        mem_ax.axhline(hbm_gb, color="k", ls="--", lw=1)
    work_ax.set_ylabel("work (layers of FLOPs)")
    mem_ax.set_ylabel("GB per GPU")
    for ax in (work_ax, mem_ax):
        ax.set_xlabel("pipeline rank")
    work_ax.legend(loc="lower center", fontsize="small")
    return fig


def gemm_efficiency_figure(
    curves: Sequence[tuple[str, Sequence[float]]],
    ms: Sequence[int],
    lines: Sequence[tuple[str, float]],
    font: int = 8,
) -> Figure:
    """Modelled GEMM efficiency against m, one curve per (n, k).

    Args:
        curves: a label and the fraction of peak at each of ``ms``, per curve.
        ms: the m of each point.
        lines: horizontal references, a label and a fraction each (the ceiling,
            the constant the planner assumed).
        font: base font size in points.

    Returns:
        The figure.
    """
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.subplots()
    for label, effs in curves:
        ax.plot(ms, effs, drawstyle="steps-post", label=label, linewidth=1.3)
    for (label, y), style in zip(lines, ("--", ":"), strict=False):
        ax.axhline(y, color="0.4", linestyle=style, linewidth=1, label=label)
    ax.set_xlabel("m: tokens of one micro-batch on one rank", fontsize=font)
    ax.set_ylabel("fraction of dense BF16 peak", fontsize=font)
    ax.set_ylim(0, 1)
    ax.set_xlim(min(ms), max(ms))
    ax.tick_params(labelsize=font)
    ax.legend(fontsize=font, loc="lower right", frameon=False)
    return fig
