"""Figures of HCCL's algorithms: NHR step by step, and the all-reduce crossovers."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from aiinfra.comm import cost, steps
from aiinfra.comm.hccl import schedules
from aiinfra.comm.hccl.cost import ALL_REDUCE, crossover_size_between
from aiinfra.comm.hccl.env import exec_timeout


def nhr_schedule_figure(p: int = 5) -> Figure:
    """NHR's all-reduce of p slices on p ranks after each step, in a grid."""
    return steps.schedule_figure(schedules.replay_all_reduce("nhr", p), "slices")


def nhr_schedule_frames(p: int = 5) -> list[Figure]:
    """NHR's all-reduce of p slices on p ranks, one slide frame per step."""
    return steps.schedule_frames(schedules.replay_all_reduce("nhr", p), "slices")


def crossover_figure(
    p: int = 6,
    link: cost.Link = "ib400",
    names: tuple[str, ...] = ("ring", "H-D_R", "NHR"),
) -> Figure:
    """All-reduce time against message size (log-log) for HCCL's algorithms.

    Each curve is its algorithm's cost on p ranks over ``link``; a dot marks each size
    where two of them cost the same.
    """
    n = np.logspace(10, 31, 85, base=2)  # 1 KiB .. 2 GiB
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.subplots()
    for k in names:
        ax.plot(n, [ALL_REDUCE[k](x, p, link) * 1e6 for x in n], label=k)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            x = crossover_size_between(a, b, p, link)
            if x is not None and n[0] <= x <= n[-1]:
                t = ALL_REDUCE[a](x, p, link) * 1e6
                ax.scatter([x], [t], color="black", s=20, zorder=3)
    ax.set(
        xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="time (us)"
    )
    ax.set_title(f"all-reduce, p = {p}")
    ax.legend(fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
    return fig


def exec_timeout_figure(up_to: int = 400) -> Figure:
    """The wait HCCL applies against the HCCL_EXEC_TIMEOUT set, for both products.

    The Atlas training series rounds down to a multiple of 68 s (at least 68 s);
    Atlas A2 takes the value as set.
    """
    x = np.arange(1, up_to + 1)  # seconds set
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.subplots()
    ax.plot(x, [exec_timeout(v, "atlas-a2") for v in x], label="Atlas A2")
    ax.step(
        x,
        [exec_timeout(v, "atlas-training") for v in x],
        where="post",
        label="Atlas training series",
    )
    ax.set(xlabel="HCCL_EXEC_TIMEOUT set (s)", ylabel="wait applied (s)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig
