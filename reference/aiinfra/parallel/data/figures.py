"""Step-by-step pictures of data parallelism: DDP's buckets in backward.

A lecture advances an algorithm one step per frame; the book shows the steps at once.
Both come from one drawing function per picture, fed by the package's own code. The
DDP timeline places the buckets of :func:`~aiinfra.parallel.data.bucketed.
assign_buckets` on a stated cost model (Li et al. 2020, Sec. 3.2): a layer's backward
takes ``BACKWARD_TIME`` per parameter (its 4 B Psi_l FLOPs grow with its parameters),
all its gradients are ready when it ends, and a full bucket's all-reduce takes
``ALL_REDUCE_LATENCY`` plus ``ALL_REDUCE_TIME`` per element (Hockney's alpha + n beta),
launched in bucket order, one on the network at a time. Every text is either words
or numbers, so the book can translate words. :data:`BOOK` and :data:`SLIDE` are the
font sizes of every picture of this package (:mod:`aiinfra.parallel.zero.figures`
draws ZeRO's stages).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import nn

from aiinfra import checks
from aiinfra.parallel.data.bucketed import assign_buckets
from aiinfra.parallel.data.naive import trainable_parameters
from aiinfra.parallel.toy import mlp

BACKWARD_TIME = 1.0  # time units per parameter of a layer's backward
ALL_REDUCE_LATENCY = 500.0  # alpha: time units per all-reduce, whatever its size
ALL_REDUCE_TIME = 0.5  # beta: time units per gradient element all-reduced
BACKWARD, ALL_REDUCE, IDLE = "#1f77b4", "#ff7f0e", "#bbbbbb"
TITLES = [  # what a frame shows: the start, a bucket sent, the whole step
    "buckets fill in reverse order as backward runs",
    "a full bucket is sent while backward goes on",
    "overlap against sending every bucket after backward",
]
BOOK, SLIDE = 8, 14  # base font sizes, points: book figures and lecture frames


@dataclass(frozen=True)
class Span:
    """One box of a timeline: layer or bucket ``index`` busy from start to end."""

    index: int
    start: float
    end: float


@dataclass(frozen=True)
class OverlapTimeline:
    """One backward pass of bucketed DDP on the cost model.

    Attributes:
        backward: one span per layer (0 = the input's), last layer first.
        all_reduce: one span per bucket, in launch order.
        buckets: the parameter names of each bucket, as ``assign_buckets`` made it.
        sequential: the step time if every bucket waited for the end of backward.
    """

    backward: list[Span]
    all_reduce: list[Span]
    buckets: list[list[str]]
    sequential: float

    @property
    def step(self) -> float:
        """Time from the start of backward to the last all-reduce's end."""
        return max(self.backward[-1].end, self.all_reduce[-1].end)

    @property
    def saved(self) -> float:
        """What overlapping saves: ``sequential - step``."""
        return self.sequential - self.step


def simulate_overlap(
    model: nn.Module,
    bucket_bytes: int,
    backward_time: float = BACKWARD_TIME,
    latency: float = ALL_REDUCE_LATENCY,
    all_reduce_time: float = ALL_REDUCE_TIME,
) -> OverlapTimeline:
    """Time the backward pass and the bucket all-reduces of ``BucketedDDP(model)``.

    A layer is a module that owns trainable parameters; backward runs them in the
    reverse of registration order (forward order, for ``nn.Sequential``).

    Args:
        model: the replica; its parameters are only read.
        bucket_bytes: the bucket cap, bytes, as ``BucketedDDP`` takes it.
        backward_time: time per parameter of a layer's backward.
        latency: time per all-reduce (alpha).
        all_reduce_time: time per element all-reduced (beta).

    Raises:
        ValueError: a time < 0, ``bucket_bytes`` <= 0, or no trainable parameter.
    """
    for name, value in [
        ("backward_time", backward_time),
        ("latency", latency),
        ("all_reduce_time", all_reduce_time),
    ]:
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    groups = assign_buckets(trainable_parameters(model), bucket_bytes)
    names = {p: n for n, p in model.named_parameters()}
    owned = (
        [p for p in m.parameters(recurse=False) if p.requires_grad]
        for m in model.modules()
    )
    layers = [ps for ps in owned if ps]  # the modules that own trainable parameters
    backward, ready, t = [], {}, 0.0
    for i in reversed(range(len(layers))):
        end = t + backward_time * sum(p.numel() for p in layers[i])
        backward.append(Span(i, t, end))
        ready.update({p: end for p in layers[i]})  # post-accumulate-grad hooks fire
        t = end
    all_reduce, free = [], 0.0
    for b, ps in enumerate(groups):
        # Launched once full and in bucket order; one bucket on the network at a time.
        start = max(free, *(ready[p] for p in ps))
        free = start + latency + all_reduce_time * sum(p.numel() for p in ps)
        all_reduce.append(Span(b, start, free))
    sequential = t + sum(s.end - s.start for s in all_reduce)
    buckets = [[names[p] for p in ps] for ps in groups]
    return OverlapTimeline(backward, all_reduce, buckets, sequential)


def _box(ax: Axes, x0: float, x1: float, y: float, colour: str, gid: str) -> None:
    """A filled box of lane ``y`` from ``x0`` to ``x1``, tagged ``gid`` for tests."""
    box = Rectangle((x0, y - 0.35), x1 - x0, 0.7, facecolor=colour, gid=gid)
    ax.add_patch(box).set(edgecolor="white", linewidth=2)


def draw_overlap_step(ax: Axes, timeline: OverlapTimeline, k: int, fs: float) -> None:
    """Draw ``timeline`` after step ``k``: 0 = nothing run, k = bucket k all-reduced.

    Backward is drawn up to the moment bucket k's all-reduce ends (dotted: still to
    run); the last step adds the lane that sends every bucket after backward.

    Args:
        ax: the panel to draw in.
        timeline: from :func:`simulate_overlap`.
        k: the step, 0 to the number of buckets.
        fs: base font size, points.

    Raises:
        ValueError: ``k`` is not in [0, number of buckets].
    """
    n = len(timeline.all_reduce)
    checks.int_in("k", k, 0, n)  # 0 .. the number of buckets
    now = timeline.all_reduce[k - 1].end if k else 0.0
    label = {"ha": "center", "va": "center", "color": "white", "fontsize": fs}
    for s in timeline.backward:
        plan = Rectangle((s.start, 1.65), s.end - s.start, 0.7, fill=False)
        ax.add_patch(plan).set(edgecolor=IDLE, linestyle=":", linewidth=2)
        if s.start < now:
            _box(ax, s.start, min(s.end, now), 2, BACKWARD, f"backward:{s.index}")
        colour = "white" if s.end <= now else "dimgrey"  # still to run: grey
        ax.text((s.start + s.end) / 2, 2, str(s.index + 1), **label | {"color": colour})
    for s in timeline.all_reduce[:k]:
        _box(ax, s.start, s.end, 1, ALL_REDUCE, f"all-reduce:{s.index}")
        ax.text((s.start + s.end) / 2, 1, str(s.index + 1), **label)
    if k == n:  # the same buckets, each sent after backward
        t = timeline.backward[-1].end
        _box(ax, 0.0, t, 0, IDLE, "sequential:backward")
        for s in timeline.all_reduce:
            _box(ax, t, t + s.end - s.start, 0, ALL_REDUCE, f"sequential:{s.index}")
            ax.text(t + (s.end - s.start) / 2, 0, str(s.index + 1), **label)
            t += s.end - s.start
        step, sequential = timeline.step, timeline.sequential
        for x in (step, sequential):
            ax.axvline(x, color="black", linestyle="--", linewidth=2)
        arrow = {"arrowstyle": "<->", "linewidth": 2}
        ax.annotate("", (step, 2.6), (sequential, 2.6), arrowprops=arrow)
        mid, saved = (step + sequential) / 2, f"{timeline.saved:.0f}"
        ax.text(mid, 2.75, "saved", ha="center", fontsize=fs)
        ax.text(mid, 2.45, saved, ha="center", va="top", fontsize=fs)
    elif k:
        ax.axvline(now, color="black", linestyle="--", linewidth=2)
    ax.set_title(TITLES[min(k, 1) + (k == n)], loc="left", fontsize=fs + 2)
    ax.set_xlim(0, max(timeline.sequential, timeline.step) * 1.02)
    ax.set_ylim(-0.5, 3.1)
    ax.set_yticks(range(3), ["no overlap", "all-reduce", "backward"], fontsize=fs)
    ax.tick_params(axis="x", labelsize=fs)
    ax.set_xlabel("time", fontsize=fs)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def overlap_frames(widths: Sequence[int], bucket_bytes: int) -> list[Figure]:
    """One slide per step of bucketed DDP on the toy MLP: buckets + 1 frames.

    Args:
        widths: the MLP's layer widths (:func:`~aiinfra.parallel.toy.mlp`).
        bucket_bytes: the bucket cap, bytes.
    """
    timeline = simulate_overlap(mlp(widths), bucket_bytes)
    frames = []
    for k in range(len(timeline.all_reduce) + 1):
        fig = Figure(figsize=(10, 5.0), layout="constrained")
        draw_overlap_step(fig.add_subplot(), timeline, k, SLIDE)
        frames.append(fig)
    return frames


def overlap_figure(widths: Sequence[int], bucket_bytes: int) -> Figure:
    """The whole step of bucketed DDP on the toy MLP (the last frame), book size."""
    timeline = simulate_overlap(mlp(widths), bucket_bytes)
    fig = Figure(figsize=(7, 2.6), layout="constrained")
    draw_overlap_step(fig.add_subplot(), timeline, len(timeline.all_reduce), BOOK)
    return fig
