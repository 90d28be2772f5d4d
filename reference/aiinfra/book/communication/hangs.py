"""What ``docs/communication/hangs.rst`` shows: reproducible hangs and their culprits.

The runs come from the stamped file of ``aiinfra comm hangs``
(:mod:`aiinfra.comm.hangs`): per scenario, what each gloo rank raised, after how
long, the collectives each rank's flight recorder logged, and the diagnosis.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from matplotlib.figure import Figure
from torch.distributed import constants

from aiinfra import results
from aiinfra.comm import hangs
from aiinfra.report import Table

_NAMES = {  # a scenario as the page calls it
    "mismatch": "mismatched collective",
    "mismatch_detail": "the same under DETAIL",
    "stall": "stalled rank",
    "die": "dead rank",
}
_CUT = ". This is typically"  # gloo's advice after the message, left out


@cache
def _res() -> dict[str, Any]:
    return results.load("hangs", "gloo")


def _row(scenario: str) -> dict[str, Any]:
    for row in _res()["rows"]:
        if row["scenario"] == scenario:
            return row
    raise ValueError(f"scenario must be one of {hangs.SCENARIOS}, got {scenario!r}")


def _stamp() -> dict:
    """The measurement's machine, torch and day, as a stamp template and fields."""
    s = _res()["stamp"]
    template, fields = results.measured_on(s)
    return {
        "stamp": template + "; torch {torch}",
        "fields": {**fields, "torch": s["torch"]},
    }


def nccl_default_timeout_min() -> float:
    """PyTorch's default timeout of an NCCL process group, minutes."""
    return hangs.TORCH_NCCL_DEFAULT_TIMEOUT_S / 60


def default_timeout_min() -> float:
    """PyTorch's default timeout of the other backends (gloo), minutes."""
    return constants.default_pg_timeout.total_seconds() / 60


def hang_timeout_s() -> float:
    """The process-group timeout of the stamped runs, seconds."""
    return _res()["config"]["timeout_s"]


def hang_ranks() -> int:
    """Ranks of the stamped runs; the last one is the culprit."""
    return _res()["config"]["world_size"]


def culprit_rank() -> int:
    """The rank that misbehaves in every scenario (the last)."""
    return hang_ranks() - 1


def first_error_s(scenario: str) -> float:
    """Seconds from entering the faulty collective to the first rank's error."""
    return min(s for s in _row(scenario)["elapsed_s"] if s is not None)


def errors_table(scenario: str) -> Table:
    """What each rank raised in ``scenario``, verbatim but trimmed, and when."""
    row = _row(scenario)
    rows = []
    for rank, (error, seconds) in enumerate(
        zip(row["errors"], row["elapsed_s"], strict=True)
    ):
        text = (error or "").split(_CUT)[0]  # none: the process exited
        rows.append([rank, "" if seconds is None else f"{seconds:.2f}", text])
    if row["launcher"]:
        rows.append(["launcher", "", row["launcher"]])
    return Table(
        ["rank", "after (s)", "what torch raised"],
        rows,
        note="Gloo ranks spawned on one machine; messages with the build path and "
        "the tensor options removed; times from entering the faulty collective; no "
        "message: the process exited.",
        **_stamp(),
    )


def timeline_figure(scenario: str) -> Figure:
    """Each rank's collectives in ``scenario`` against time, from the recorders."""
    row = _row(scenario)
    n = len(row["timeline"])
    fig = Figure(figsize=(6.4, 1.1 + 0.55 * n), layout="constrained")
    ax = fig.add_subplot()
    colours = {"all_reduce": "C0", "broadcast": "C1"}
    end = max(e[3] or e[2] for rank in row["timeline"] for e in rank)
    right = end * 1.25 + 0.01
    for rank, entries in enumerate(row["timeline"]):
        for k, (seq, op, start, stop, failed) in enumerate(entries):
            stop = stop if stop is not None else right
            ax.barh(
                rank,
                max(stop - start, right / 300),
                left=start,
                height=0.5,
                color=colours.get(op, "C2"),
                label=op,
            )
            if stop - start > right / 20:
                ax.text(
                    (start + stop) / 2,
                    rank,
                    f"#{seq}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white",
                )
            if failed:
                ax.plot(stop, rank, "kx", markersize=9, label="raised")
            if k + 1 < len(entries) and entries[k + 1][2] - stop > right / 20:
                ax.barh(
                    rank,
                    entries[k + 1][2] - stop,
                    left=stop,
                    height=0.12,
                    color="0.6",
                    label="outside any collective",
                )
        if rank in row["culprits"]:
            last = max(e[3] or e[2] for e in entries)
            ax.text(last + right / 60, rank, "culprit", va="center", color="C3")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(
        unique.values(),
        unique.keys(),
        loc="lower center",
        ncol=len(unique),
        bbox_to_anchor=(0.5, 1.0),
        fontsize=8,
        frameon=False,
    )
    ax.set_yticks(range(n), [f"r{r}" for r in range(n)])
    ax.invert_yaxis()
    ax.set_xlim(0, right)
    ax.set_xlabel("time since the first collective (s)")
    ax.set_ylabel("rank")
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def diagnosis_table() -> Table:
    """Each scenario's culprit from our recorder, beside torch's flight recorder."""
    rows = []
    for row in _res()["rows"]:
        last = [
            f"r{r}: #{fr['seq']} {fr['op'].removeprefix('gloo:')}" if fr else f"r{r}: -"
            for r, fr in enumerate(row["torch_fr"])
        ]
        culprits = ", ".join(str(r) for r in row["culprits"])
        rows.append([_NAMES[row["scenario"]], culprits, "; ".join(last)])
    return Table(
        ["scenario", "culprit named", "torch's flight recorder: last collective"],
        rows,
        note="Culprit from aiinfra.comm.flight_recorder.diagnose on our own logs; "
        "torch's flight recorder dumped by each surviving rank (gloo, on request).",
        **_stamp(),
    )
