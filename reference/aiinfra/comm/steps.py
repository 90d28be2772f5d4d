"""Step-by-step figures of the chapter's collectives, drawn from their replays.

One function, :func:`draw_step`, draws one state of a schedule replayed by
:mod:`aiinfra.comm.schedules`: a row per rank (rank 0 on top), a column per chunk (for
recursive doubling, per rank whose vector is summed in), a bracket for each pair that
talks in the step, with an arrowhead at each receiver, and a thick edge on each cell
the step wrote. Colours are those of the chapter's other buffer figures: a rank's own
colour for its data, greys that darken as a cell sums more ranks, white for nothing.
The book's figure is every step in a grid (book fonts); a lecture deck shows each
step as a frame of its own, 1280x720 (slide fonts).
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle
from matplotlib.path import Path

from aiinfra import checks
from aiinfra.comm import schedules
from aiinfra.comm.figures import SUM_COLOR, _color, _draw_buffers
from aiinfra.comm.schedules import Step

BOOK, SLIDE = 8, 14  # font sizes: a book column, a 1280x720 slide
LANE = 0.4  # width of one lane of brackets, in cells


def _brackets(sends: Sequence[tuple[int, int]]) -> list[tuple[int, int, bool, int]]:
    """Each pair that talks as (src, dst, both ways, lane).

    Pairs whose rank ranges overlap get different lanes: greedy interval partitioning,
    pairs in order of their first rank.
    """
    pairs: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for src, dst in sends:
        pairs.setdefault((min(src, dst), max(src, dst)), []).append((src, dst))
    ends: list[int] = []  # the last rank each lane reaches so far
    out = []
    for (a, b), ways in sorted(pairs.items()):
        lane = next((i for i, end in enumerate(ends) if end < a), len(ends))
        ends[lane : lane + 1] = [b]
        out.append((*ways[0], len(ways) > 1, lane))
    return out


def _kinds(steps: Sequence[Step]) -> list[tuple[str, object]]:
    """Legend entries (words, fill) for the kinds of cell that ``steps`` hold."""
    p = len(steps[0].held)
    sizes = {len(h) for st in steps for row in st.held for h in row}
    kinds = [
        (0 in sizes, "nothing", "white"),
        (1 in sizes, "one rank's data", colormaps["tab10"](0)),
        (bool(sizes - {0, 1, p}), "partial sum", _color(frozenset({0, 1}), max(p, 3))),
        (p > 1 and p in sizes, "sum over all ranks", SUM_COLOR),
    ]
    return [(word, fill) for present, word, fill in kinds if present]


def draw_step(
    ax: Axes,
    steps: Sequence[Step],
    k: int,
    *,
    columns: str,
    node_size: int = 0,
    slide: bool = False,
) -> None:
    """Draw state ``steps[k]`` on ``ax``: rank r's cells in row r (rank 0 on top).

    A cell is white when empty, a rank's colour when it holds that rank's data, and
    darker the more ranks it sums; a thick edge marks a cell that step k wrote, a
    bracket joins each pair that talks in it (an arrowhead at the receiver).

    Args:
        ax: an empty Axes.
        steps: a whole schedule (its width and the phase's length come from it).
        k: the step to draw, in [0, len(steps)).
        columns: what a column is, in words (``"chunks"``), the x label.
        node_size: ranks per node, > 0 to draw a dashed line between nodes.
        slide: slide fonts and lines (else book ones).
    """
    fs, lw = (SLIDE, 3.5) if slide else (BOOK, 1.6)
    st, p, n = steps[k], len(steps[k].held), len(steps[k].held[0])
    _draw_buffers(
        ax, [[(h, c) for c, h in enumerate(row)] for row in st.held], 0, p, False
    )
    for r, row in enumerate(st.held):
        for c, h in enumerate(row):
            if k > 0 and h and h != steps[k - 1].held[r][c]:  # written in this step
                ax.add_patch(Rectangle((c, p - 1 - r), 0.9, 0.9, fill=False, lw=lw))
    for src, dst, both, lane in _brackets(st.sends):
        y0, y1 = p - 0.55 - src, p - 0.55 - dst
        if not both:  # a tail leaves a row above its middle, a head arrives below
            y0, y1 = y0 + 0.15, y1 - 0.15
        x0, x1 = n - 0.05, n - 0.05 + LANE * (lane + 1)
        path = Path([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
        style = "<|-|>" if both else "-|>"
        ax.add_patch(
            FancyArrowPatch(
                path=path,
                arrowstyle=style,
                mutation_scale=3 * lw + 4,
                lw=lw / 2,
                color="black",
            )
        )
    for b in range(node_size, p, node_size) if node_size > 0 else ():
        ax.plot([-0.3, n], [p - b - 0.05] * 2, ls="--", color="black", lw=lw / 2)
    lanes = max((b[3] + 1 for s in steps for b in _brackets(s.sends)), default=0)
    ax.set(xlim=(-0.3, n + LANE * lanes + 0.2), ylim=(-0.1, p), aspect="equal")
    total = sum(s.phase == st.phase for s in steps)
    if total > 1:  # "2/3": the step within its phase, a separate, untranslated text
        ax.text(
            0.5,
            1.01,
            f"{st.step}/{total}",
            transform=ax.transAxes,
            ha="center",
            va="bottom",
            fontsize=fs,
        )
    ax.set_title(
        st.phase, fontsize=fs + 1 + 3 * slide, pad=1.6 * fs if total > 1 else 4
    )
    ax.set_yticks([p - 0.55 - r for r in range(p)], [f"r{r}" for r in range(p)])
    ax.tick_params(length=0, labelsize=fs)
    ax.set_xticks([])
    ax.set_xlabel(columns, fontsize=fs)
    for side in ax.spines.values():
        side.set_visible(False)


def _legend(fig: Figure, steps: Sequence[Step], fs: int, **where: object) -> None:
    handles = [Patch(fc=fill, ec="0.5", label=word) for word, fill in _kinds(steps)]
    handles.append(Patch(fill=False, ec="black", lw=2, label="written in this step"))
    fig.legend(handles=handles, fontsize=fs, frameon=False, **where)


def schedule_figure(
    steps: Sequence[Step], columns: str, cols: int = 4, node_size: int = 0
) -> Figure:
    """Every step of a schedule in a grid of ``cols`` panels a row (book fonts).

    Raises:
        ValueError: ``steps`` is empty or ``cols`` < 1.
    """
    if not steps:
        raise ValueError("steps must hold at least the start")
    checks.positive_int("cols", cols)
    rows, p = -(-len(steps) // cols), len(steps[0].held)
    width = len(steps[0].held[0]) + 3  # in cells: the rank labels and brackets
    tall = min(7 / cols * (p + 1.5) / width, 2.6)  # inches per row of panels
    fig = Figure(figsize=(7, rows * tall + 0.4), layout="constrained")
    for k, ax in enumerate(fig.subplots(rows, cols, squeeze=False).flat):
        if k >= len(steps):
            ax.remove()
            continue
        draw_step(ax, steps, k, columns=columns, node_size=node_size)
        ax.tick_params(labelleft=k % cols == 0)
        if k + cols < len(steps):  # the x label under the last row only
            ax.set_xlabel("")
    _legend(fig, steps, BOOK, loc="outside lower center", ncols=3)
    return fig


def schedule_frames(
    steps: Sequence[Step], columns: str, node_size: int = 0
) -> list[Figure]:
    """One 1280x720 frame per step of a schedule (slide fonts).

    Raises:
        ValueError: ``steps`` is empty.
    """
    if not steps:
        raise ValueError("steps must hold at least the start")
    frames = []
    for k in range(len(steps)):
        fig = Figure(figsize=(10, 5.0), layout="constrained")
        draw_step(
            fig.subplots(), steps, k, columns=columns, node_size=node_size, slide=True
        )
        _legend(fig, steps, SLIDE, loc="outside right center")
        frames.append(fig)
    return frames


def ring_schedule_figure(p: int = 4) -> Figure:
    """The ring all-reduce of p chunks on p ranks after each step, in a grid."""
    return schedule_figure(schedules.simulate_ring_all_reduce(p), "chunks", cols=4)


def ring_schedule_frames(p: int = 4) -> list[Figure]:
    """The ring all-reduce of p chunks on p ranks, one frame per step."""
    return schedule_frames(schedules.simulate_ring_all_reduce(p), "chunks")


def recursive_doubling_figure(p: int = 8) -> Figure:
    """Recursive doubling on p ranks: whose vectors each rank has summed, per step."""
    return schedule_figure(schedules.simulate_recursive_doubling(p), "ranks summed")


def recursive_doubling_frames(p: int = 8) -> list[Figure]:
    """Recursive doubling on p ranks, one frame per step."""
    return schedule_frames(schedules.simulate_recursive_doubling(p), "ranks summed")


def halving_doubling_figure(p: int = 8) -> Figure:
    """Rabenseifner's halving-doubling all-reduce of p chunks on p ranks, per step."""
    return schedule_figure(schedules.simulate_halving_doubling(p), "chunks")


def halving_doubling_frames(p: int = 8) -> list[Figure]:
    """Rabenseifner's halving-doubling all-reduce, one frame per step."""
    return schedule_frames(schedules.simulate_halving_doubling(p), "chunks")


def binomial_broadcast_figure(p: int = 8, root: int = 0) -> Figure:
    """The binomial-tree broadcast from ``root`` on p ranks, round by round."""
    return schedule_figure(schedules.simulate_binomial_broadcast(p, root), "data")


def binomial_broadcast_frames(p: int = 8, root: int = 0) -> list[Figure]:
    """The binomial-tree broadcast from ``root`` on p ranks, one frame per round."""
    return schedule_frames(schedules.simulate_binomial_broadcast(p, root), "data")


def hierarchical_figure(num_nodes: int = 2, local_size: int = 4) -> Figure:
    """The hierarchical all-reduce of nodes of ``local_size`` ranks, phase by phase."""
    steps = schedules.simulate_hierarchical_all_reduce(num_nodes, local_size)
    return schedule_figure(steps, "shards", node_size=local_size)


def hierarchical_frames(num_nodes: int = 2, local_size: int = 4) -> list[Figure]:
    """The hierarchical all-reduce, one frame per phase."""
    steps = schedules.simulate_hierarchical_all_reduce(num_nodes, local_size)
    return schedule_frames(steps, "shards", node_size=local_size)
