"""What ``docs/cloud/preflight.rst`` shows: the checks, their committed run, DCGM.

The per-rank numbers are the stamped run of ``aiinfra preflight`` with a silent
data corruption planted on one rank and a straggler on another
(:mod:`aiinfra.cloud.preflight`, CPU, gloo); the interruption counts are Llama 3's
(:data:`aiinfra.hardware.reliability.LLAMA3_405B_CAUSES`); the DCGM levels are
:data:`aiinfra.cloud.preflight.dcgm.DCGM_LEVELS`.
"""

from __future__ import annotations

from functools import cache

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.cloud.preflight import config
from aiinfra.cloud.preflight.dcgm import DCGM_LEVELS, LEVEL_MINUTES
from aiinfra.hardware import reliability as rel
from aiinfra.report import Table

__all__ = [
    "checksum_delta",
    "dcgm_table",
    "level_cost_pct",
    "measured_busbw",
    "preflight_figure",
    "preflight_table",
    "run_value",
    "sdc_interruptions",
    "sdc_share_pct",
    "slowdown",
    "straggler_ratio",
    "times_median",
    "unexpected_interruptions",
]


@cache
def _run() -> dict:
    return results.load("preflight", "gloo")


def run_value(key: str) -> int:
    """A setting of the committed run, or the rank of a planted fault.

    ``ranks``, ``size``, ``iters``: its settings; ``sdc``, ``slow``: the rank the
    fault was planted on.
    """
    res = _run()
    return res["faults"][key] if key in config.FAULTS else res["config"][key]


def straggler_ratio() -> float:
    """The ratio to the ranks' median GEMM time above which a rank is a straggler."""
    return config.STRAGGLER_RATIO


def slowdown() -> int:
    """How many times the planted straggler computes each GEMM."""
    return config.INJECTED_SLOWDOWN


def times_median(rank: int) -> float:
    """Rank ``rank``'s median GEMM time over the ranks' median, in the committed run."""
    gemm = _run()["gemm"]
    return gemm["seconds"][rank] / gemm["median"]


def checksum_delta() -> int:
    """How far the corrupted rank's last checksum is from the majority's."""
    sums = _run()["gemm"]["checksums"]
    bad = run_value("sdc")
    good = next(r for r in range(len(sums)) if r != bad)
    return sums[bad][-1] - sums[good][-1]


def measured_busbw() -> float:
    """The committed run's all-reduce bus bandwidth, GB/s (gloo on this CPU)."""
    return _run()["all_reduce"]["busbw"]


def preflight_table() -> Table:
    """Each rank's verdicts in the committed run."""
    res = _run()
    gemm, rep = res["gemm"], res["replicas"]
    rows = [
        [
            rank,
            "exact" if res["all_reduce"]["exact"][rank] else "wrong",
            round(gemm["seconds"][rank] * 1e3, 3),
            round(times_median(rank), 2),
            "corrupt" if rank in gemm["sdc_ranks"] else "agrees",
            "straggler" if rank in gemm["stragglers"] else "ok",
            "differs" if rank in rep["disagree"] else "agrees",
        ]
        for rank in range(res["config"]["ranks"])
    ]
    st = res["stamp"]
    return Table(
        [
            "rank",
            "all-reduce sum",
            "GEMM (ms)",
            "times the median",
            "GEMM results",
            "speed",
            "replica checksum",
        ],
        rows,
        note="aiinfra preflight with a bit flipped in one rank's GEMM results and "
        "another rank computing each GEMM three times; GEMM time is the median of "
        "one rank's GEMMs, in CPU time.",
        words=(1, 4, 5, 6),
        stamp=results.measured_on(st)[0],
        fields=results.measured_on(st)[1],
    )


def preflight_figure() -> Figure:
    """Each rank's GEMM time against the median, the straggler and the SDC marked."""
    res = _run()
    gemm = res["gemm"]
    ranks = range(res["config"]["ranks"])
    ratios = [times_median(r) for r in ranks]
    colors = ["#d62728" if r in gemm["stragglers"] else "#3182bd" for r in ranks]
    fig = Figure(figsize=(8, 3.4), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(list(ranks), ratios, color=colors, width=0.6)
    ax.axhline(1.0, color="#636363", lw=1, label="median")
    ax.axhline(
        config.STRAGGLER_RATIO, color="#d62728", ls="--", lw=1, label="straggler line"
    )
    for r in gemm["sdc_ranks"]:
        ax.annotate(
            "results differ",
            (r, ratios[r]),
            xytext=(0, 6),
            textcoords="offset points",
            ha="center",
            color="#d62728",
            fontsize=9,
        )
        ax.bar([r], [ratios[r]], width=0.6, fill=False, hatch="//", edgecolor="#d62728")
    ax.set_xticks(list(ranks), [str(r) for r in ranks])
    ax.set_xlabel("rank")
    ax.set_ylabel("GEMM time over the median")
    ax.set_ylim(0, max(ratios) * 1.2)
    ax.legend(loc="upper left", fontsize=9)
    return fig


def dcgm_table() -> Table:
    """NVIDIA DCGM's diagnostic levels: duration, what each adds, when to run it."""
    rows = [[level, *rest] for level, _, *rest in DCGM_LEVELS]
    aliases = ", ".join(alias for _, alias, *_ in DCGM_LEVELS)
    return Table(
        ["level", "duration", "adds", "when"],
        rows,
        note="Each level also runs everything of the levels before it; dcgmi diag -r "
        f"also takes the names {aliases} for levels 1 to {len(DCGM_LEVELS)}. "
        "Durations: the dcgmi diag reference; tests: DCGM's source "
        "(FillTestVectors); when: the DCGM user guide.",
        words=(1, 2, 3),
    )


def snapshot_days() -> int:
    """Days of Llama 3 405B's pre-training that its interruption table covers."""
    return int(rel.LLAMA3_405B.days)


def unexpected_interruptions() -> int:
    """Llama 3 405B's unexpected interruptions in the 54-day snapshot."""
    return rel.LLAMA3_405B.unexpected


def sdc_interruptions() -> int:
    """Those of them the paper attributes to silent data corruption."""
    (n,) = [n for c, _, n, _ in rel.LLAMA3_405B_CAUSES if c == "Silent data corruption"]
    return n


def sdc_share_pct() -> float:
    """Silent data corruption's share of the unexpected interruptions, % as printed."""
    (p,) = [p for c, _, _, p in rel.LLAMA3_405B_CAUSES if c == "Silent data corruption"]
    return p


def level_cost_pct(level: int) -> float:
    """DCGM level ``level`` at every restart, % of Llama 3's time between failures.

    The level's usual minutes (:data:`~aiinfra.cloud.preflight.dcgm.LEVEL_MINUTES`)
    over the time between Llama 3's unexpected interruptions.
    """
    mtbf_minutes = 60 * rel.interruption_rates(rel.LLAMA3_405B).job_mtbf_hours
    return 100 * LEVEL_MINUTES[level] / mtbf_minutes
