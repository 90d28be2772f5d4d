"""Step-by-step figures of the online softmax and of FlashAttention's tiles.

The package's own code is replayed: the online softmax (Milakov & Gimelshein 2018)
by :func:`online_states`, which ``online_normalizer`` runs too, and FlashAttention-2
(Dao 2023, Alg. 1) by tracing :func:`tiled_forward` with a ``TorchFunctionMode`` that
records the blocks it slices, the tiles it masks and the output rows it writes. One
function draws one step: the book shows all steps in a grid, a deck one per frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from torch.overrides import TorchFunctionMode

from aiinfra import checks
from aiinfra.models.flash.attention import tiled_forward
from aiinfra.models.flash.online_softmax import online_states

BOOK, SLIDE = 8, 14  # font sizes: a book column, a 1280x720 slide
NEW, READ, UNREAD = "C1", "C0", "0.88"
SRAM, DONE, FINAL, SKIPPED = "C1", "#fbd9b0", "0.35", "0.92"


@dataclass(frozen=True)
class SoftmaxStep:
    """The online softmax's state after reading ``j`` scores.

    Args:
        j: scores read so far (0 at the start).
        new: how many of them this step read (0 at the start).
        m: running maximum ``m_j`` (``-inf`` at the start).
        d: running sum ``l_j = sum e^{x - m_j}`` over the scores read (0 at the start).
        m_prev: the maximum before, if this step (not the first) raised it; ``d``
            was then rescaled by ``e^{m_prev - m}``.
    """

    j: int
    new: int
    m: float
    d: float
    m_prev: float | None = None


def softmax_steps(x: Sequence[float], block_size: int = 1) -> list[SoftmaxStep]:
    """Replay :func:`online_states` over ``x``: the start, then one step per block.

    Args:
        x: the scores, one row.
        block_size: scores per step, as in :func:`online_softmax`.

    Returns:
        ``1 + ceil(len(x) / block_size)`` states.

    Raises:
        ValueError: ``x`` is empty or ``block_size`` < 1.
    """
    if len(x) == 0:
        raise ValueError("x must hold at least one score")
    checks.positive_ints(block_size=block_size)
    blocks = torch.tensor(x, dtype=torch.float64).split(block_size)  # b scores each
    steps = [SoftmaxStep(0, 0, -math.inf, 0.0)]
    for block, (m, d) in zip(blocks, online_states(iter(blocks)), strict=True):
        prev = steps[-1]
        m_prev = prev.m if prev.j > 0 and m.item() > prev.m else None
        steps.append(
            SoftmaxStep(prev.j + len(block), len(block), m.item(), d.item(), m_prev)
        )
    return steps


def draw_softmax_step(ax: Axes, step: SoftmaxStep, x: Sequence[float], fs: int) -> None:
    """One step: the scores (read, new, unread), ``m_j`` as a line, ``l_j`` as text."""
    n, k = len(x), step.j
    colors = [READ] * (k - step.new) + [NEW] * step.new + [UNREAD] * (n - k)
    ax.bar(range(1, n + 1), x, color=colors, edgecolor="0.3", linewidth=fs / 8)
    ax.set_xticks(range(1, n + 1), [f"$x_{{{i}}}$" for i in range(1, n + 1)])
    ax.tick_params(labelsize=fs)
    ax.set_ylim(min(0.0, *x), 1.6 * max(x))
    lines = ["$m_{0} = -\\infty$", "$\\ell_{0} = 0$"]
    if k > 0:
        lines = [f"$m_{{{k}}} = {step.m:.2f}$", f"$\\ell_{{{k}}} = {step.d:.2f}$"]
        ax.axhline(step.m, color="C3", linestyle="--", linewidth=fs / 5)
    if step.m_prev is not None:
        ax.axhline(step.m_prev, color="C3", linestyle=":", linewidth=fs / 5)
        rescale = math.exp(step.m_prev - step.m)  # what l_{j-1} is multiplied by
        lines.append(f"$e^{{m_{{{k - step.new}}} - m_{{{k}}}}} = {rescale:.2f}$")
    for row, text in enumerate(lines):
        style = {"fontsize": fs, "va": "top", "color": "C3" if row == 2 else "black"}
        at = {"xycoords": "axes fraction", "textcoords": "offset points"}
        ax.annotate(text, (0.02, 0.97), xytext=(0, -1.6 * fs * row), **at, **style)


def _softmax_legend() -> list[Any]:
    return [
        Patch(color=READ, label="read"),
        Patch(color=NEW, label="read now"),
        Patch(color=UNREAD, label="not read yet"),
        Line2D([], [], color="C3", linestyle="--", label="running max"),
        Line2D([], [], color="C3", linestyle=":", label="previous max"),
    ]


def _frames(draw: Callable, steps: list, legend: Callable, **kw: Any) -> list[Figure]:
    """One 1280x720 slide per step, slide fonts, the legend at the right."""
    frames = []
    for step in steps:
        fig = Figure(figsize=(10, 5.0), layout="constrained")
        ax = fig.add_subplot()
        draw(ax, step, **kw, fs=SLIDE)
        right = {"loc": "center left", "bbox_to_anchor": (1, 0.5)}
        ax.legend(handles=legend(), fontsize=SLIDE, **right)
        frames.append(fig)
    return frames


def _grid(draw: Callable, steps: list, legend: Callable, **kw: Any) -> Figure:
    """Every step in a grid, book fonts, the legend below."""
    cols = math.ceil(math.sqrt(len(steps)))
    rows = -(-len(steps) // cols)
    fig = Figure(figsize=(7, 1.8 * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, step in zip(axes, steps, strict=False):
        draw(ax, step, **kw, fs=BOOK)
    for ax in axes[len(steps) :]:
        ax.set_axis_off()
    fig.legend(handles=legend(), fontsize=BOOK, loc="outside lower center", ncols=5)
    return fig


def softmax_frames(x: Sequence[float], block_size: int = 1) -> list[Figure]:
    """One slide per state of :func:`softmax_steps`: ``1 + ceil(T / b)`` frames."""
    steps = softmax_steps(x, block_size)
    return _frames(draw_softmax_step, steps, _softmax_legend, x=x)


def softmax_figure(x: Sequence[float], block_size: int = 1) -> Figure:
    """Every state of :func:`softmax_steps` in a grid, for the book."""
    return _grid(draw_softmax_step, softmax_steps(x, block_size), _softmax_legend, x=x)


@dataclass(frozen=True)
class TileStep:
    """FlashAttention's forward after visiting one tile of ``S`` (or at the start).

    Args:
        tile: ``(i, j)``, the query and key block (from 0) whose score tile is in
            SRAM, with ``Q_i``, ``K_j`` and ``V_j``; None at the start.
        done: the tiles visited before, in order (computed, then discarded).
        masked: the tiles visited so far that got the causal mask.
        final: the query blocks whose output rows are written, final.
        skipped: the tiles the whole run never visits.
    """

    tile: tuple[int, int] | None
    done: tuple[tuple[int, int], ...] = ()
    masked: tuple[tuple[int, int], ...] = ()
    final: tuple[int, ...] = ()
    skipped: frozenset[tuple[int, int]] = frozenset()


class _TileTrace(TorchFunctionMode):
    """Records what :func:`tiled_forward` slices from ``q`` and ``k``, masks, writes."""

    def __init__(self, q: torch.Tensor, k: torch.Tensor) -> None:
        super().__init__()
        self.names = {id(q): "q", id(k): "k"}  # the tensors whose slices count
        self.events: list[tuple[str, int]] = []  # ("q" | "k" | "o", start), ("mask", 0)

    def __torch_function__(self, func, types, args=(), kwargs=None) -> Any:  # noqa: ANN001
        if func is torch.Tensor.__getitem__ and id(args[0]) in self.names:
            self.events.append((self.names[id(args[0])], args[1][2].start))
        elif func is torch.Tensor.masked_fill:
            self.events.append(("mask", 0))
        elif func is torch.Tensor.__setitem__ and args[0].dim() == 4:  # rows of O
            self.events.append(("o", args[1][2].start))
        return func(*args, **(kwargs or {}))


def tile_steps(n: int, block_q: int, block_k: int, causal: bool) -> list[TileStep]:
    """Run :func:`tiled_forward` on ``T = n`` positions and replay the tiles it visits.

    Args:
        n: sequence length ``T``.
        block_q: ``B_r``, queries per block.
        block_k: ``B_c``, keys per block.
        causal: as in :func:`tiled_forward`.

    Returns:
        The start and one state per visited tile, in the order of the run.

    Raises:
        ValueError: ``n``, ``block_q`` or ``block_k`` is not a positive int.
    """
    checks.positive_ints(n=n, block_q=block_q, block_k=block_k)
    q, k, v = (torch.zeros(1, 1, n, 1) for _ in range(3))  # (B, H, N, d)
    with _TileTrace(q, k) as trace:
        tiled_forward(q, k, v, causal, 1.0, block_q, block_k)
    steps, i = [TileStep(None)], 0
    for kind, start in trace.events:
        last = steps[-1]
        if kind == "q":
            i = start // block_q
        elif kind == "k":
            done = last.done + ((last.tile,) if last.tile else ())
            steps.append(TileStep((i, start // block_k), done, last.masked, last.final))
        elif kind == "mask":
            steps[-1] = replace(last, masked=last.masked + (last.tile,))
        else:
            steps[-1] = replace(last, final=last.final + (start // block_q,))
    every = {(i, j) for i in range(-(-n // block_q)) for j in range(-(-n // block_k))}
    skipped = frozenset(every - {step.tile for step in steps})
    return [replace(step, skipped=skipped) for step in steps]


def _tile_style(step: TileStep, tile: tuple[int, int], fs: int) -> dict[str, Any]:
    """Face and edge of one tile of ``S``: in SRAM, computed, skipped or untouched."""
    if tile in step.skipped:
        return {"facecolor": SKIPPED, "hatch": "//"}
    face = SRAM if tile == step.tile else DONE if tile in step.done else "white"
    if tile in step.masked:  # a red dashed edge, drawn above its neighbours
        return dict(facecolor=face, edgecolor="C3", ls="--", lw=fs / 4, zorder=2)
    return {"facecolor": face}


def draw_tile_step(
    ax: Axes, step: TileStep, n: int, block_q: int, block_k: int, fs: int
) -> None:
    """One step: blocks of ``Q`` and ``K, V``, tiles of ``S``, row blocks of ``O``.

    In SRAM (orange): ``Q_i``, ``K_j``, ``V_j``, ``S_ij``, ``O_i``'s accumulator.
    """
    g, w = block_k / 4, block_k  # gap, width of the Q and O columns
    i_now, j_now = step.tile if step.tile else (-1, -1)
    boxes = []  # (x, y, width, height, style)
    for i, i0 in enumerate(range(0, n, block_q)):
        h = min(block_q, n - i0)
        o_face = FINAL if i in step.final else SRAM if i == i_now else "white"
        boxes.append((-g - w, i0, w, h, {"facecolor": SRAM if i == i_now else "white"}))
        boxes.append((n + g, i0, w, h, {"facecolor": o_face}))
        for j, j0 in enumerate(range(0, n, block_k)):
            c = min(block_k, n - j0)
            boxes.append((j0, i0, c, h, _tile_style(step, (i, j), fs)))
    for j, j0 in enumerate(range(0, n, block_k)):  # K_j and V_j, above S
        kv = {"facecolor": SRAM if j == j_now else "white"}
        boxes.append((j0, -g - block_q, min(block_k, n - j0), block_q, kv))
    edge = {"edgecolor": "0.3", "linewidth": fs / 8}
    for x, y, dx, dy, style in boxes:
        ax.add_patch(Rectangle((x, y), dx, dy, **edge | style))
    if step.skipped or step.masked:  # the causal diagonal, key = query position
        ax.plot([0, n], [0, n], color="black", linewidth=fs / 8)
    labels = {"K, V": (-g - w / 2, -g - block_q / 2), "Q": (-g - w / 2, n + g)}
    labels |= {"S": (n / 2, n + g), "O": (n + g + w / 2, n + g)}
    for text, (x, y) in labels.items():
        va = "center" if text == "K, V" else "top"
        ax.text(x, y, text, ha="center", va=va, fontsize=fs)
    title = "start" if step.tile is None else f"$S_{{{i_now + 1},{j_now + 1}}}$"
    ax.set_title(title, fontsize=fs + 2)
    ax.set_xlim(-2 * g - w, n + 2 * g + w)
    ax.set_ylim(n + 2 * g + fs / 8 * g, -2 * g - block_q)
    ax.set_aspect("equal")
    ax.set_axis_off()


def _tile_legend() -> list[Any]:
    return [
        Patch(facecolor=SRAM, edgecolor="0.3", label="in SRAM"),
        Patch(facecolor=DONE, edgecolor="0.3", label="computed"),
        Patch(facecolor=SKIPPED, edgecolor="0.3", hatch="//", label="skipped"),
        Patch(facecolor="white", edgecolor="C3", linestyle="--", label="masked"),
        Patch(facecolor=FINAL, edgecolor="0.3", label="final output"),
    ]


def tile_frames(n: int, block_q: int, block_k: int, causal: bool) -> list[Figure]:
    """One slide per state of :func:`tile_steps`: visited tiles + 1 frames."""
    steps = tile_steps(n, block_q, block_k, causal)
    geometry = {"n": n, "block_q": block_q, "block_k": block_k}
    return _frames(draw_tile_step, steps, _tile_legend, **geometry)


def tile_figure(n: int, block_q: int, block_k: int, causal: bool) -> Figure:
    """Every state of :func:`tile_steps` in a grid, for the book."""
    steps = tile_steps(n, block_q, block_k, causal)
    geometry = {"n": n, "block_q": block_q, "block_k": block_k}
    return _grid(draw_tile_step, steps, _tile_legend, **geometry)
