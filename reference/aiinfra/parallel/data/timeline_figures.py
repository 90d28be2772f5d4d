"""Pictures of the simulated data-parallel step (:mod:`aiinfra.parallel.data.timeline`).

A Gantt chart of backward and all-reduce lanes for a few settings, and the exposed
communication against the bucket cap for a few links. Both draw what the simulator
computed; nothing here times anything. Times are drawn in milliseconds, sizes in MiB.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from aiinfra.parallel.data.timeline import DpTimeline


def timeline_figure(timelines: Sequence[tuple[str, DpTimeline]]) -> Figure:
    """Compute and communication lanes of each timeline, one pair per setting.

    Args:
        timelines: (label, timeline) pairs, drawn top to bottom.

    Raises:
        ValueError: no timeline.
    """
    if not timelines:
        raise ValueError("timelines must hold at least one (label, timeline)")
    fig = Figure(figsize=(7, 0.9 + 1.0 * len(timelines)), layout="constrained")
    ax = fig.add_subplot()
    ticks, names = [], []
    for k, (label, tl) in enumerate(timelines):
        y = 3 * (len(timelines) - 1 - k)  # compute lane at y + 1, comm lane at y
        for lane, spans, colours in (
            (y + 1, tl.backward, ("#1f77b4", "#6baed6")),
            (y, tl.all_reduce, ("#ff7f0e", "#fdae6b")),
        ):
            drawn = [s for s in spans if s.end > s.start]  # biases, norms: no time
            for j, s in enumerate(drawn):  # alternate shades to tell boxes apart
                width = (s.end - s.start) * 1e3
                box = Rectangle((s.start * 1e3, lane - 0.4), width, 0.8)
                ax.add_patch(box).set(facecolor=colours[j % 2], lw=0)
        end = tl.backward_end * 1e3
        ax.plot([end, end], [y - 0.5, y + 1.5], color="black", lw=1)
        ax.text(
            tl.all_reduce[-1].end * 1e3,
            y,
            f" {tl.exposed * 1e3:.2f} ms",
            va="center",
            fontsize=7,
        )  # the exposed time, right of the last all-reduce
        ticks += [y + 1, y]
        names += [f"{label}: backward", "all-reduce"]
    ax.set_yticks(ticks, names, fontsize=7)
    ax.set_xlabel("time from the start of backward (ms)")
    ax.autoscale_view()
    ax.set_xlim(0, max(tl.all_reduce[-1].end for _, tl in timelines) * 1.15e3)
    return fig


def bucket_sweep_figure(
    curves: Sequence[tuple[str, Sequence[int], Sequence[float], float]],
    default_bytes: int,
) -> Figure:
    """Exposed time against bucket cap, one curve per link.

    Args:
        curves: (label, caps in bytes, exposed seconds, alpha-beta bucket size).
        default_bytes: DDP's default cap, drawn dotted.

    Raises:
        ValueError: no curve, or a curve whose caps and times differ in length.
    """
    if not curves or any(len(c[1]) != len(c[2]) for c in curves):
        raise ValueError("curves must be non-empty, with one time per cap")
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.add_subplot()
    for (label, caps, exposed, rule), style in zip(curves, ("o-", "s-"), strict=False):
        mib = [c / 2**20 for c in caps]
        (line,) = ax.plot(mib, [e * 1e3 for e in exposed], style, ms=3, label=label)
        ax.axvline(rule / 2**20, color=line.get_color(), ls="--", lw=1)
    ax.axvline(default_bytes / 2**20, color="gray", ls=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bucket cap (MiB)")
    ax.set_ylabel("exposed communication (ms)")
    ax.legend(fontsize=7)
    return fig
