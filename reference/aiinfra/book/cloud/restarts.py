"""What ``docs/cloud/restarts.rst`` shows: a killed worker, the restart, the resume.

The numbers are the stamped run of ``aiinfra bench restart``
(:mod:`aiinfra.cloud.restart_bench`): :mod:`aiinfra.cloud.train` under torchrun on
this book's CPU, once with a worker killed and once without.
"""

from __future__ import annotations

from functools import cache

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.report import Table

__all__ = [
    "agent_table",
    "attempts_table",
    "restart_figure",
    "restart_frames",
    "restart_seconds",
    "restart_value",
    "retrained_in_run",
]


@cache
def _bench() -> dict:
    return results.load("restart", "gloo")


def restart_value(key: str) -> int:
    """A number of the stamped run.

    ``ranks``, ``steps``, ``every``, ``fail_at``, ``fail_rank``: its settings;
    ``resumed_from``: the step the restarted group resumed from.
    """
    res = _bench()
    if key == "resumed_from":
        (step,) = {
            r["resumed_from"] for r in res["restarted"]["records"] if r["attempt"]
        }
        return step
    return res["config"][key]


def restart_seconds(run: str) -> float:
    """Wall seconds of the ``restarted`` or the ``control`` run, torchrun included."""
    return _bench()[run]["seconds"]


def retrained_in_run() -> int:
    """Steps the measured run trained twice: those after the last commit."""
    return restart_value("fail_at") - 1 - restart_value("resumed_from")


def attempts_table() -> Table:
    """Every worker's record of every attempt, in the run with a killed worker."""
    rows = []
    for r in _bench()["restarted"]["records"]:
        end = r["final_step"] if r["final_step"] is not None else "-"
        killed = r.get("killed_at_step", "-")
        start = r["resumed_from"] if r["resumed_from"] is not None else "-"
        rows.append([r["attempt"], r["rank"], start, killed, end])
    st = _bench()["stamp"]
    return Table(
        ["attempt", "rank", "resumed from step", "killed before step", "ended at step"],
        rows,
        note="Each worker's own record (aiinfra.cloud.train), written as it ran.",
        stamp=results.measured_on(st)[0],
        fields=results.measured_on(st)[1],
    )


def agent_table() -> Table:
    """What torchrun's agent printed when the worker died."""
    rows = [[line] for line in _bench()["restarted"]["agent_lines"]]
    return Table(
        ["torchrun's agent"],
        rows,
        note="Log lines of the run, prefixes with time and source file removed.",
        words=(),
    )


# The steps of the restart the frames walk through, in order.
_RESTART_PHASES = ("train", "kill", "rendezvous", "resume")


def _draw_restart(ax: Axes, phase: str, fontsize: float) -> None:
    """The measured run up to ``phase`` of :data:`_RESTART_PHASES`.

    ``train``: attempt 0's steps and its commits; ``kill``: the worker dies;
    ``rendezvous``: torchrun stops the group and the agents meet again;
    ``resume``: attempt 1 loads the last commit and trains to the end.
    """
    shown = _RESTART_PHASES[: _RESTART_PHASES.index(phase) + 1]
    res = _bench()
    cfg = res["config"]
    attempts = sorted({r["attempt"] for r in res["restarted"]["records"]})
    for row, attempt in enumerate(reversed(attempts)):
        if attempt > 0 and "resume" not in shown:
            continue
        recs = [r for r in res["restarted"]["records"] if r["attempt"] == attempt]
        start = (recs[0]["resumed_from"] or 0) + 1
        killed = [r["killed_at_step"] for r in recs if "killed_at_step" in r]
        end = killed[0] - 1 if killed else recs[0]["final_step"]
        ax.barh(row, end - start + 1, left=start - 0.5, color="#3182bd", height=0.5)
        commits = [s for s in range(start, end + 1) if s % cfg["every"] == 0]
        ax.scatter(
            commits,
            [row] * len(commits),
            marker="v",
            color="#31a354",
            s=90,
            zorder=3,
            label="checkpoint committed" if attempt == 0 else None,
        )
        if killed and "kill" in shown:
            ax.scatter(
                [killed[0] - 0.5],
                [row],
                marker="x",
                color="#d62728",
                s=140,
                zorder=4,
                label="worker killed",
            )
        if killed and "rendezvous" in shown:
            ax.annotate(
                "every worker stopped; the agents meet again",
                ((cfg["steps"] + 1) / 2, row - 0.45),
                fontsize=fontsize,
                ha="center",
                color="#d62728",
            )
        if recs[0]["resumed_from"]:
            ax.annotate(
                "resumes from the last checkpoint",
                (start - 0.5, row + 0.3),
                fontsize=fontsize,
                ha="left",
            )
    labels = [f"attempt {a}" for a in reversed(attempts)]
    ax.set_yticks(range(len(attempts)), labels, fontsize=fontsize)
    ax.set_xticks(range(1, cfg["steps"] + 1))
    ax.tick_params(labelsize=fontsize)
    ax.set_xlim(0.3, cfg["steps"] + 0.7)
    ax.set_ylim(-0.6, len(attempts) - 0.2)
    ax.set_xlabel("training step", fontsize=fontsize)
    ax.legend(loc="upper right", fontsize=fontsize)


def restart_figure() -> Figure:
    """The steps each attempt trained, with the checkpoints and the failure."""
    fig = Figure(figsize=(9, 3.2), layout="constrained")
    _draw_restart(fig.add_subplot(), _RESTART_PHASES[-1], 9)
    return fig


def restart_frames() -> list[Figure]:
    """The measured restart, one phase per frame: train, kill, rendezvous, resume."""
    frames = []
    for phase in _RESTART_PHASES:
        fig = Figure(figsize=(10, 5), layout="constrained")
        _draw_restart(fig.add_subplot(), phase, 14)
        frames.append(fig)
    return frames
