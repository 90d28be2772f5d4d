"""Figures of the collective-communication chapter, drawn from the code at book build.

Each function returns a :class:`matplotlib.figure.Figure` (no pyplot, no global
state) sized for a 700-pixel column: the cost model's all-reduce time against message
size with its crossovers (Thakur, Rabenseifner & Gropp 2005), the same against the
number of ranks, the semantics of the six collectives as before/after buffers, and
measured bus bandwidth from a ``bench`` results file. Colour encodes the rank a chunk
came from; a dark box holds a full sum. The step-by-step schedules of the algorithms
are drawn by :mod:`aiinfra.comm.steps` with the buffer helpers of this module.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from aiinfra import results
from aiinfra.comm import cost, nccl_model

SUM_COLOR = "0.25"  # a chunk that holds every rank's contribution
RANK_COLORS = (0, 1, 2, 3, 4, 5, 6, 8, 9)  # tab10 without its grey, kept for sums
ALL_REDUCE = {
    "ring": cost.ring_all_reduce_time,
    "recursive doubling": cost.recursive_doubling_all_reduce_time,
    "Rabenseifner": cost.rabenseifner_all_reduce_time,
}
NCCL_ALL_REDUCE = {  # what NCCL adds: pipelined double trees, reducing switches
    "double binary tree": nccl_model.double_binary_tree_all_reduce_time,
    "in-network (SHARP, NVLS)": nccl_model.in_network_all_reduce_time,
}

# A buffer cell: (the ranks whose data it sums, the chunk index), or None if empty.
Cell = tuple[frozenset[int], int] | None


def collective_semantics(collective: str, p: int = 4) -> tuple[list, list]:
    """Buffers of each rank before and after ``collective``, as lists of cells.

    A cell is ``(ranks summed, chunk)``; root is rank 0. Each rank's input to a
    broadcast, reduce, all-reduce, reduce-scatter or all-to-all is p chunks.

    Raises:
        ValueError: unknown ``collective``.
    """
    full, ranks = frozenset(range(p)), range(p)
    mine = [[(frozenset({r}), c) for c in range(p)] for r in ranks]
    summed = [(full, c) for c in range(p)]
    table = {
        "broadcast": (
            [mine[0]] + [[None] * p for _ in range(p - 1)],
            [mine[0] for _ in ranks],
        ),
        "reduce": (mine, [summed] + mine[1:]),
        "all_reduce": (mine, [summed for _ in ranks]),
        "reduce_scatter": (mine, [[(full, r)] for r in ranks]),
        "all_gather": (
            [[mine[r][r]] for r in ranks],
            [[mine[c][c] for c in ranks]] * p,
        ),
        "all_to_all": (mine, [[mine[j][r] for j in ranks] for r in ranks]),
    }
    if collective not in table:
        raise ValueError(
            f"collective must be one of {sorted(table)}, got {collective!r}"
        )
    return table[collective]


def _color(held: frozenset[int] | None, p: int) -> str | tuple:
    """White if empty, the rank's colour if one rank's data, greyer as sums grow."""
    if not held:
        return "white"
    if len(held) == 1:
        return colormaps["tab10"](RANK_COLORS[next(iter(held)) % len(RANK_COLORS)])
    if len(held) == p:
        return SUM_COLOR
    return str(round(0.85 - 0.5 * (len(held) - 1) / (p - 1), 3))  # partial sums


def _draw_buffers(
    ax: Axes, buffers: list[list[Cell]], x0: float, p: int, digits: bool
) -> None:
    """Rank r's buffer as a row of unit boxes at height p - 1 - r, from x = x0."""
    for r, row in enumerate(buffers):
        for i, cell in enumerate(row):
            held, chunk = cell if cell else (None, None)
            fill = _color(held, p)
            ax.add_patch(Rectangle((x0 + i, p - 1 - r), 0.9, 0.9, fc=fill, ec="0.5"))
            if digits and cell:
                ink = "white" if held == frozenset(range(p)) else "black"
                ax.text(
                    x0 + i + 0.45,
                    p - 0.55 - r,
                    chunk,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color=ink,
                )


def collectives_figure(p: int = 4) -> Figure:
    """Before and after buffers of the six collectives on p ranks (rank 0 on top)."""
    fig = Figure(figsize=(7, 4.6), layout="constrained")
    names = "broadcast reduce all_reduce reduce_scatter all_gather all_to_all".split()
    for k, (name, ax) in enumerate(zip(names, fig.subplots(3, 2).flat, strict=True)):
        before, after = collective_semantics(name, p)
        _draw_buffers(ax, before, 0, p, digits=True)
        _draw_buffers(ax, after, p + 1.5, p, digits=True)
        ax.annotate(
            "", (p + 1.3, p / 2), (p + 0.1, p / 2), arrowprops={"arrowstyle": "->"}
        )
        ax.set(xlim=(-0.1, 2 * p + 1.6), ylim=(-0.1, p), aspect="equal")
        ax.set_title(name.replace("_", "-"), fontsize=9)
        ax.set_yticks([p - 0.55 - r for r in range(p)], [f"r{r}" for r in range(p)])
        ax.tick_params(length=0, labelsize=7, labelleft=k % 2 == 0)
        ax.set_xticks([])
        for side in ax.spines.values():
            side.set_visible(False)
    return fig


def crossover_figure(
    p: int = 16,
    link: cost.Link = "ib400",
    local_size: int = 8,
    local_link: cost.Link = "nvlink",
) -> Figure:
    """All-reduce time against message size (log-log), crossovers marked.

    The flat algorithms (dashed: NCCL's tree and in-network reduction) pay ``link``
    on every step; the hierarchical one pays
    ``local_link`` inside groups of ``local_size`` ranks and ``link`` between them.
    """
    n = np.logspace(10, 31, 64, base=2)  # 1 KiB .. 2 GiB
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.subplots()
    for label, f in (ALL_REDUCE | NCCL_ALL_REDUCE).items():
        dashed = {"linestyle": "--"} if label in NCCL_ALL_REDUCE else {}
        ax.plot(n, [f(x, p, link) * 1e6 for x in n], label=label, **dashed)
    hier = [
        cost.hierarchical_all_reduce_time(x, p, link, local_size, local_link) for x in n
    ]
    ax.plot(n, np.array(hier) * 1e6, label=f"hierarchical ({local_size} per node)")
    for name in ("ring_all_reduce", "rabenseifner_all_reduce"):
        x = cost.crossover_size("recursive_doubling_all_reduce", name, p, link)
        if x is not None:  # where recursive doubling stops being the fastest
            t = cost.recursive_doubling_all_reduce_time(x, p, link)
            ax.scatter([x], [t * 1e6], color="black", s=20, zorder=3)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="message size (bytes)",
        ylabel="time (us)",
        title=f"all-reduce, p = {p}",
    )
    ax.legend(fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
    return fig


def hierarchy_figure(
    nodes: int = 8,
    local_size: int = 8,
    rails: int = 8,
    link: cost.Link = "ib400",
    local_link: cost.Link = "nvlink",
) -> Figure:
    """All-reduce time against size (log-log): rings on one NIC and on rails, hierarchy.

    On ``nodes`` nodes of ``local_size`` ranks: a ring whose channels share one NIC
    per node, one that spreads them over ``rails`` NICs, and the hierarchical
    all-reduce with the same NICs.
    """
    n, p = np.logspace(10, 31, 64, base=2), nodes * local_size
    curves = {
        "ring, one NIC per node": (nccl_model.multirail_ring_all_reduce_time, 1),
        "ring, one rail per NIC": (nccl_model.multirail_ring_all_reduce_time, rails),
        "hierarchical, all NICs": (cost.hierarchical_all_reduce_time, rails),
    }
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.subplots()
    for label, (f, r) in curves.items():
        t = [f(x, p, link, local_size, local_link, r) * 1e6 for x in n]
        ax.plot(n, t, label=label)
    ax.set(xscale="log", yscale="log", xlabel="message size (bytes)")
    ax.set(ylabel="time (us)", title=f"all-reduce, {nodes} nodes x {local_size}")
    ax.legend(fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
    return fig


def double_tree_figure(p: int = 8) -> Figure:
    """NCCL's two binary trees over p ranks, side by side: rank on x, depth down."""
    fig = Figure(figsize=(7, 2.6), layout="constrained")
    for k, (ax, tree) in enumerate(
        zip(fig.subplots(1, 2), nccl_model.double_binary_tree(p), strict=True)
    ):

        def depth(r: int, tree: list = tree) -> int:
            return 0 if tree[r] is None else 1 + depth(tree[r])

        for r, up in enumerate(tree):
            if up is not None:
                ax.plot([r, up], [-depth(r), -depth(up)], color="0.5", zorder=1)
        for r in range(p):
            inner = r in tree  # a rank with children
            ax.scatter(
                [r],
                [-depth(r)],
                s=260,
                zorder=2,
                ec="black",
                color=SUM_COLOR if inner else "white",
            )
            ax.text(
                r,
                -depth(r),
                r,
                ha="center",
                va="center",
                fontsize=8,
                color="white" if inner else "black",
                zorder=3,
            )
        ax.set_title(("first tree", "second tree (mirrored)")[k], fontsize=9)
        ax.set_axis_off()
    return fig


def scaling_figure(
    sizes: tuple[int, ...] = (8 * 2**10, 64 * 2**20), link: cost.Link = "nvlink"
) -> Figure:
    """All-reduce time against the number of ranks p = 2..256, one panel per size.

    Recursive doubling and Rabenseifner jump where p passes a power of two (the fold).
    """
    ps = np.arange(2, 257)
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    for ax, n in zip(fig.subplots(1, len(sizes), squeeze=False)[0], sizes, strict=True):
        for label, f in ALL_REDUCE.items():
            ax.plot(ps, [f(n, int(p), link) * 1e6 for p in ps], label=label)
        ax.set(xscale="log", yscale="log", xlabel="ranks p")
        ax.set_title(cost.format_bytes(n), fontsize=10)
        ax.set_xticks([2, 8, 32, 128], ["2", "8", "32", "128"])
        ax.grid(True, alpha=0.3)
    fig.axes[0].set_ylabel("time (us)")
    fig.axes[0].legend(fontsize=8)
    return fig


def results_figure(backend: str = "gloo") -> Figure:
    """Measured busbw against size: one panel per collective, a line per algorithm.

    The rows are the stored ``collectives`` results of ``backend``.

    Raises:
        FileNotFoundError: no results on ``backend`` (the message names the command
            that writes them).
        ValueError: the results hold no rows.
    """
    measured = results.load("collectives", backend)
    if not measured["rows"]:
        raise ValueError(f"the {backend} collectives results hold no rows to plot")
    by: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for row in measured["rows"]:
        series = by.setdefault(row["collective"], {}).setdefault(row["algorithm"], [])
        series.append((row["size"], row["busbw"]))
    cols = min(len(by), 3)
    fig = Figure(figsize=(7, 2.4 * math.ceil(len(by) / cols)), layout="constrained")
    axes = fig.subplots(math.ceil(len(by) / cols), cols, squeeze=False).flat
    for (collective, algs), ax in zip(sorted(by.items()), axes, strict=False):
        for alg, pts in sorted(algs.items()):
            x, y = zip(*sorted(pts), strict=True)
            torch_style = (
                {"color": "black", "linestyle": "--"} if alg == "torch" else {}
            )
            ax.plot(x, y, marker=".", label=alg, **torch_style)
        ax.set(xscale="log")
        ax.set_title(collective.replace("_", "-"), fontsize=10)
        ax.set_xlabel("size (bytes)", fontsize=8)
        ax.set_ylabel("busbw (GB/s)", fontsize=8)
        ax.legend(fontsize=6)
        ax.grid(True, alpha=0.3)
    for ax in list(axes):
        ax.remove()  # the unused cells of the grid
    stamp = measured["stamp"]
    fig.suptitle(f"{stamp['backend']}, {stamp['world_size']} ranks", fontsize=9)
    return fig
