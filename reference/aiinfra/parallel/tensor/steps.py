"""The tensor-parallel MLP step by step, every rank simulated in one process.

:class:`~aiinfra.parallel.tensor.layers.TensorParallelSwiGLU` runs on ``p`` ranks;
:func:`mlp_steps` runs the same arithmetic on ``p`` slices in one process and keeps
what each rank holds after each step, so a figure (and a lecture, one frame per
step) can show where the data is: the replicated input, each rank's column-parallel
slices of the gate and the up projection, the element-wise product, the row-parallel
partial sums, and the sum that ``g`` (the all-reduce) leaves on every rank. The
tests hold the last step to the unsplit MLP and each step to what the real layers
compute on gloo ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor, nn

from aiinfra.models.layers import SwiGLU
from aiinfra.parallel.data.figures import BOOK, SLIDE
from aiinfra.parallel.tensor.ops import shard_size

RANK_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


@dataclass(frozen=True)
class Step:
    """What every rank holds after one step.

    Args:
        title: the step, as a frame's title.
        held: one tensor per rank (its last dimension is what is split).
        partial: the tensors are partial sums, not slices (before ``g``).
        communication: the step's collective, or ``""``.
    """

    title: str
    held: list[Tensor]
    partial: bool = False
    communication: str = ""


def mlp_steps(mlp: SwiGLU, x: Tensor, p: int) -> list[Step]:
    """The tensor-parallel SwiGLU ``w2(silu(w1 x) * w3 x)`` on ``p`` simulated ranks.

    Args:
        mlp: the full MLP (its weights are sliced, not changed).
        x: the input ``(..., h)``, the same on every rank.
        p: tensor-parallel ranks.

    Returns:
        Five steps; the last holds the output, equal on every rank.

    Raises:
        ValueError: ``p`` < 1 or does not divide ``d_ff``.
    """
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"p must be an integer >= 1, got {p!r}")
    local = shard_size("d_ff", mlp.w1.out_features, p)
    rows = [slice(r * local, (r + 1) * local) for r in range(p)]

    def column(layer: nn.Linear, r: int) -> Tensor:
        b = None if layer.bias is None else layer.bias[rows[r]]
        return F.linear(x, layer.weight[rows[r]], b)  # (..., d_ff/p)

    gate = [column(mlp.w1, r) for r in range(p)]
    up = [column(mlp.w3, r) for r in range(p)]
    hidden = [F.silu(g) * u for g, u in zip(gate, up, strict=True)]
    partial = [F.linear(hidden[r], mlp.w2.weight[:, rows[r]]) for r in range(p)]
    total = sum(partial[1:], partial[0])
    if mlp.w2.bias is not None:
        total = total + mlp.w2.bias  # added once, after the sum
    return [
        Step("input X on every rank (f: identity)", [x] * p),
        Step("column parallel: each rank its own slice of the gate (and up)", gate),
        Step("SiLU(gate) * up, element-wise: no communication", hidden),
        Step(
            "row parallel: each rank a partial sum of the output", partial, partial=True
        ),
        Step(
            "g: all-reduce sums the partials", [total] * p, communication="all-reduce"
        ),
    ]


def draw_step(axes: list[Axes], step: Step, width: int, font: int) -> None:
    """One step: each rank's tensor (first sequence, ``T x features``) as a heatmap.

    Every rank's panel is as wide as the features it holds (``width`` is the
    widest); one colour scale per step, so equal panels look equal.
    """
    held = [t.detach()[(0,) * (t.dim() - 2)] for t in step.held]  # (T, features)
    bound = max(t.abs().max().item() for t in held) or 1.0
    for r, (ax, t) in enumerate(zip(axes, held, strict=True)):
        ax.imshow(
            t.T.cpu().numpy(), cmap="RdBu_r", vmin=-bound, vmax=bound, aspect="equal"
        )
        ax.set_xlim(-0.5, t.shape[0] - 0.5)
        ax.set_ylim(width - 0.5, -0.5)  # same height everywhere: narrow = fewer rows
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set(color=RANK_COLOURS[r % 6], linewidth=2.5)
        kind = "partial sum" if step.partial else f"{t.shape[1]} features"
        ax.set_xlabel(f"rank {r}: {kind}", fontsize=font)
    axes[0].figure.suptitle(step.title, fontsize=font + 2)


def _width(steps: list[Step]) -> int:
    return max(t.shape[-1] for s in steps for t in s.held)


def mlp_steps_figure(steps: list[Step]) -> Figure:
    """All steps, one row each (ranks left to right), book size."""
    p = len(steps[0].held)
    fig = Figure(figsize=(7, 1.6 * len(steps)), layout="constrained")
    for step, sub in zip(steps, fig.subfigures(len(steps), 1), strict=True):
        axes = list(sub.subplots(1, p, squeeze=False)[0])
        draw_step(axes, step, _width(steps), BOOK)
        sub.suptitle(step.title, fontsize=BOOK + 1)
    return fig


def mlp_steps_frames(steps: list[Step]) -> list[Figure]:
    """One lecture frame per step."""
    frames = []
    p = len(steps[0].held)
    for step in steps:
        fig = Figure(figsize=(10, 5.0), layout="constrained")
        draw_step(
            list(fig.subplots(1, p, squeeze=False)[0]), step, _width(steps), SLIDE
        )
        frames.append(fig)
    return frames
