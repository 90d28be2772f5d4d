"""Pictures of pipeline schedules, drawn from what the simulator computed.

A timeline puts each rank on a lane and each F, B and W of
:func:`~aiinfra.parallel.pipeline.simulator.simulate` in a box numbered with its
micro-batch; the bubble is the white between boxes. Two summaries follow from the
same replays: the bubble against the number of micro-batches beside the published
formulas, and the activations each rank holds at its peak. A last picture shows
which layers each rank holds, from :func:`~aiinfra.parallel.pipeline.executor.
stage_layers`. Nothing here times anything. Notation: p ranks, m micro-batches
(the book's k), v chunks per rank, L layers.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from aiinfra.parallel.pipeline.executor import stage_layers
from aiinfra.parallel.pipeline.schedules import make_schedule
from aiinfra.parallel.pipeline.simulator import (
    PipelineCosts,
    PipelineTimeline,
    simulate,
)

COLOURS = {  # kind -> (first chunk, later chunks)
    "F": ("#1f77b4", "#9ecae1"),
    "B": ("#ff7f0e", "#fdd0a2"),
    "W": ("#2ca02c", "#a1d99b"),
}
LEGEND = {"F": "F: forward", "B": "B: backward", "W": "W: weight gradients"}
RANK_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def timeline_figure(
    timelines: Sequence[tuple[str, PipelineTimeline]], fs: float = 8
) -> Figure:
    """One panel per schedule: a lane per rank, a numbered box per action.

    Args:
        timelines: (title, timeline) pairs, drawn top to bottom on one time axis.
        fs: base font size, points.

    Raises:
        ValueError: no timeline, or ``fs`` not > 0.
    """
    if not timelines:
        raise ValueError("timelines must hold at least one (title, timeline)")
    if not fs > 0:
        raise ValueError(f"fs must be > 0, got {fs!r}")
    height = sum(0.45 + 0.28 * t.schedule.p for _, t in timelines) + 0.5
    fig = Figure(figsize=(7, height), layout="constrained")
    ratios = [t.schedule.p + 1 for _, t in timelines]
    axes = fig.subplots(len(timelines), 1, sharex=True, height_ratios=ratios)
    axes = axes if len(timelines) > 1 else [axes]
    for ax, (title, tl) in zip(axes, timelines, strict=True):
        p = tl.schedule.p
        for span in tl.spans:
            a, width = span.action, span.end - span.start
            y = p - 1 - a.rank  # rank 0 on top
            colour = COLOURS[a.kind][min(a.chunk, 1)]
            box = Rectangle((span.start, y - 0.4), width, 0.8, lw=0.3)
            ax.add_patch(box).set(facecolor=colour, edgecolor="white")
            ax.text(
                span.start + width / 2,
                y,
                str(a.microbatch),
                ha="center",
                va="center",
                fontsize=fs - 2.5,
            )
        ax.set_title(title, loc="left", fontsize=fs + 1)
        ax.set_title(f"{tl.bubble:.0%} of the step idle", loc="right", fontsize=fs)
        ax.set_yticks(range(p), [str(r) for r in reversed(range(p))], fontsize=fs)
        ax.set_ylabel("rank", fontsize=fs)
        ax.set_ylim(-0.6, p - 0.4)
        ax.tick_params(axis="x", labelsize=fs)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[-1].set_xlim(0, max(t.step for _, t in timelines) * 1.01)
    axes[-1].set_xlabel("time (one forward through a rank's layers = 1)", fontsize=fs)
    split = any(t.schedule.splits_backward for _, t in timelines)
    kinds = ["F", "B", "W"] if split else ["F", "B"]
    handles = [Patch(facecolor=COLOURS[k][0], label=LEGEND[k]) for k in kinds]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=fs)
    return fig


def bubble_figure(p: int, ms: Sequence[int], v: int, fs: float = 8) -> Figure:
    """Bubble over ideal compute against m: simulated points, published curves.

    Args:
        p: ranks.
        ms: micro-batch counts, multiples of p (interleaving needs them).
        v: chunks per rank of the interleaved schedule.
        fs: base font size, points.

    Raises:
        ValueError: the schedules' own constraints on p, m, v.
    """
    costs = PipelineCosts(1, 1, 1)
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.add_subplot()
    curves = [  # schedules, v, published bubble over ideal, its label
        (("GPipe", "1F1B"), 1, lambda m: (p - 1) / m, "published: $(p-1)/k$"),
        (
            ("interleaved 1F1B",),
            v,
            lambda m: (p - 1) / (v * m),
            f"published, $v = {v}$: $(p-1)/(vk)$",
        ),
        (("ZB-H1",), 1, lambda m: (p - 1) / (3 * m), "published: $(p-1)/(3k)$"),
    ]
    fine = [ms[0] + (ms[-1] - ms[0]) * k / 200 for k in range(201)]
    markers = iter("xosD")
    for names, chunks, formula, label in curves:
        (line,) = ax.plot(fine, [formula(m) for m in fine], lw=1, label=label)
        for name in names:
            sim = [simulate(make_schedule(name, p, m, chunks), costs) for m in ms]
            bubbles = [t.bubble_over_ideal for t in sim]
            marker = next(markers)
            style = {"mfc": "none"} if marker != "x" else {}
            ax.plot(
                ms,
                bubbles,
                marker,
                ms=5,
                color=line.get_color(),
                lw=0,
                label=f"{name}, simulated",
                **style,
            )
    ax.set_xlabel("micro-batches per step $k$", fontsize=fs)
    ax.set_ylabel("idle time / compute time", fontsize=fs)
    ax.set_ylim(0, None)
    ax.tick_params(labelsize=fs)
    ax.legend(fontsize=fs - 1)
    return fig


def memory_figure(
    timelines: Sequence[tuple[str, PipelineTimeline]], fs: float = 8
) -> Figure:
    """Peak activations held by each rank, one bar per schedule.

    In micro-batches through all of a rank's layers (an interleaved chunk counts
    1/v).

    Raises:
        ValueError: no timeline, or timelines of different p.
    """
    if not timelines or len({t.schedule.p for _, t in timelines}) != 1:
        raise ValueError("timelines must be non-empty and share one p")
    p = timelines[0][1].schedule.p
    fig = Figure(figsize=(6, 3), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(timelines)
    for k, (label, tl) in enumerate(timelines):
        xs = [r + (k - (len(timelines) - 1) / 2) * width for r in range(p)]
        bars = ax.bar(xs, tl.peak_activations(), width, label=label)
        ax.bar_label(bars, fmt="%g", fontsize=fs - 2)
    top = max(max(t.peak_activations()) for _, t in timelines)
    ax.set_ylim(0, top * 1.4)  # room for the legend
    ax.set_xticks(range(p), [str(r) for r in range(p)], fontsize=fs)
    ax.set_xlabel("rank", fontsize=fs)
    ax.set_ylabel("activations held at the peak (micro-batches)", fontsize=fs)
    ax.tick_params(labelsize=fs)
    ax.legend(fontsize=fs - 1, ncol=len(timelines), loc="upper center")
    return fig


def stage_figure(n_layers: int, p: int, vs: Sequence[int], fs: float = 8) -> Figure:
    """Which rank holds each layer, for each v: one row of L boxes per v.

    Raises:
        ValueError: ``stage_layers``'s constraints on ``n_layers``, p, v.
    """
    fig = Figure(figsize=(7, 0.6 + 0.55 * len(vs)), layout="constrained")
    ax = fig.add_subplot()
    for row, v in enumerate(vs):
        y = len(vs) - 1 - row
        for s, layers in enumerate(stage_layers(n_layers, p, v)):
            box = Rectangle((layers.start, y - 0.35), len(layers), 0.7, lw=1)
            colour = RANK_COLOURS[(s % p) % len(RANK_COLOURS)]
            ax.add_patch(box).set(facecolor=colour, edgecolor="white")
            mid = (layers.start + layers.stop) / 2
            ax.text(
                mid, y, f"{s}", ha="center", va="center", fontsize=fs, color="white"
            )
    ax.set_yticks(range(len(vs)), [f"$v = {v}$" for v in reversed(vs)], fontsize=fs)
    ax.set_xlim(0, n_layers)
    ax.set_ylim(-0.5, len(vs) - 0.5)
    ax.set_xticks(
        [i + 0.5 for i in range(n_layers)],
        [str(i) for i in range(n_layers)],
        fontsize=fs - 1,
    )
    ax.set_xlabel("layer (box: its stage; colour: its rank)", fontsize=fs)
    handles = [Patch(facecolor=RANK_COLOURS[r], label=f"rank {r}") for r in range(p)]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.45),
        ncol=p,
        fontsize=fs - 1,
        frameon=False,
    )
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return fig
