"""What ``docs/hardware/failures.rst`` shows: its values, tables, figures.

The failure rates are those Llama 3 405B reported
(:data:`aiinfra.hardware.reliability.LLAMA3_405B`); the intervals and goodputs are
the closed forms of :mod:`aiinfra.hardware.reliability`, checked here against its
failure-by-failure simulation. The checkpoint and restart costs are assumptions,
named below, not measurements.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from aiinfra.hardware import reliability as rel
from aiinfra.report import Table

#: Restart cost ``R`` assumed throughout: minutes from a failure to training again.
RESTART_MINUTES = 10.0
#: Checkpoint cost ``C`` of an asynchronous checkpoint, seconds: the blocking part,
#: a snapshot of the training state to host memory (an assumption).
ASYNC_SNAPSHOT_S = 10.0
#: Checkpoint cost ``C`` of a slow synchronous write to storage, seconds (assumed).
SYNC_WRITE_S = 300.0
# the goodput figure's costs: the snapshot, a fast synchronous write, a slow one
_CHECKPOINT_COSTS_S = (ASYNC_SNAPSHOT_S, 60.0, SYNC_WRITE_S)
_SEED = 0
#: GPUs of the largest job the MTBF figure shows.
LARGEST_JOB = 2**17
#: Failures drawn by the Monte Carlo check.
FAILURES = 200_000

_HOURS_PER_YEAR = 365 * 24


def _rates() -> rel.InterruptionRates:
    return rel.interruption_rates(rel.LLAMA3_405B)


def _mtbf_min() -> float:
    """Llama 3's job MTBF in minutes, the ``M`` of this page."""
    return 60 * _rates().job_mtbf_hours


def llama3_table() -> Table:
    """Llama 3 405B's interruptions and the rates they imply."""
    r, L = _rates(), rel.LLAMA3_405B
    rows = [
        ["GPUs (H100)", L.gpus],
        ["days", L.days],
        ["interruptions", L.interruptions],
        ["planned", L.interruptions - L.unexpected],
        ["unexpected", L.unexpected],
        ["unexpected per day", round(r.unexpected_per_day, 2)],
        ["hours between unexpected interruptions", round(r.job_mtbf_hours, 2)],
        ["implied per-GPU MTBF (years)", round(gpu_mtbf_years(), 1)],
    ]
    return Table(
        ["quantity", "value"],
        rows,
        note="A 54-day snapshot of Llama 3 405B's pre-training (Dubey et al. 2024, "
        "Sec. 3.3.4). The per-GPU MTBF counts every unexpected interruption as one "
        "GPU's: a lower bound.",
    )


def causes_table() -> Table:
    """The root causes of Llama 3's unexpected interruptions, largest first."""
    rows = [[c, cat, n, pct] for c, cat, n, pct in rel.LLAMA3_405B_CAUSES if n >= 7]
    rest = [n for *_, n, _ in rel.LLAMA3_405B_CAUSES if n < 7]
    rest_pct = [p for *_, n, p in rel.LLAMA3_405B_CAUSES if n < 7]
    rows.append(["other", "", sum(rest), round(sum(rest_pct), 1)])
    return Table(
        ["component", "category", "interruptions", "% as printed"],
        rows,
        note="Dubey et al. 2024, Table 5; other: nine components with two to six "
        "interruptions each. The paper's percentages are printed as they are.",
        words=(0, 1),
    )


def gpu_share_pct() -> float:
    """Share of the unexpected interruptions whose category is GPU, % as printed."""
    return sum(p for _, cat, _, p in rel.LLAMA3_405B_CAUSES if cat == "GPU")


def job_mtbf_hours() -> float:
    """Hours between Llama 3's unexpected interruptions."""
    return _rates().job_mtbf_hours


def gpu_mtbf_years() -> float:
    """The per-GPU MTBF implied by Llama 3's interruptions, years (a lower bound)."""
    return _rates().gpu_mtbf_hours / _HOURS_PER_YEAR


def job_mtbf_minutes_at(gpus: int = LARGEST_JOB) -> float:
    """Job MTBF at Llama 3's per-GPU rate for a job of ``gpus`` GPUs, minutes."""
    return 60 * rel.cluster_mtbf(1 / _rates().gpu_mtbf_hours, gpus)


def mtbf_figure() -> Figure:
    """Job MTBF against the GPUs of a job, at Llama 3's per-GPU failure rate."""
    gpus = 2 ** np.arange(3, LARGEST_JOB.bit_length())
    hours = [job_mtbf_minutes_at(int(n)) / 60 for n in gpus]
    fig = Figure(figsize=(6.4, 3.4), layout="constrained")
    ax = fig.subplots()
    ax.plot(gpus, hours, "o-", color="C0")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    L = rel.LLAMA3_405B
    ax.plot([L.gpus], [job_mtbf_hours()], "s", color="C3", markersize=9)
    ax.annotate(
        "Llama 3 405B",
        (L.gpus, job_mtbf_hours()),
        xytext=(12, 12),
        textcoords="offset points",
        color="C3",
    )
    for h, label in ((24.0, "a day"), (1.0, "an hour")):
        ax.axhline(h, color="0.6", linestyle=":", linewidth=1)
        ax.text(gpus[0], h * 1.15, label, color="0.4")
    ax.set_xlabel("GPUs in the job")
    ax.set_ylabel("job MTBF (hours)")
    ax.grid(True, which="major", alpha=0.3)
    return fig


def interval_minutes(cost_s: float, rule: str = "daly") -> float:
    """Optimum interval at Llama 3's MTBF for a checkpoint of ``cost_s`` s, minutes.

    ``rule`` is ``"young"`` or ``"daly"``.
    """
    f = {"young": rel.young_interval, "daly": rel.daly_interval}[rule]
    return f(cost_s / 60, _mtbf_min())


def best_goodput_pct(cost_s: float) -> float:
    """Goodput at Daly's interval at Llama 3's MTBF, %."""
    c = cost_s / 60
    tau = rel.daly_interval(c, _mtbf_min())
    return 100 * rel.goodput(tau, c, RESTART_MINUTES, _mtbf_min())


def goodput_figure() -> Figure:
    """Goodput against the checkpoint interval for three checkpoint costs."""
    m = _mtbf_min()
    taus = np.geomspace(0.5, 300, 300)  # minutes
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    for cost_s, color in zip(_CHECKPOINT_COSTS_S, ("C2", "C0", "C3"), strict=True):
        c = cost_s / 60
        g = [100 * rel.goodput(t, c, RESTART_MINUTES, m) for t in taus]
        ax.semilogx(taus, g, color=color, label=f"C = {cost_s:.0f} s")
        tau = rel.daly_interval(c, m)
        ax.plot([tau], [best_goodput_pct(cost_s)], "o", color=color, markersize=7)
    ax.set_xlabel("checkpoint interval (minutes)")
    ax.set_ylabel("goodput (%)")
    ax.set_ylim(40, 100)
    ax.legend(loc="lower center")
    ax.grid(True, which="major", alpha=0.3)
    return fig


def checkpoint_table() -> Table:
    """Young's and Daly's intervals and the best goodput for three checkpoint costs."""
    names = (
        "asynchronous snapshot",
        "fast synchronous write",
        "slow synchronous write",
    )
    rows = [
        [
            name,
            round(cost_s),
            round(interval_minutes(cost_s, "young"), 1),
            round(interval_minutes(cost_s), 1),
            round(best_goodput_pct(cost_s), 1),
        ]
        for name, cost_s in zip(names, _CHECKPOINT_COSTS_S, strict=True)
    ]
    return Table(
        ["checkpoint", "C (s)", "Young (min)", "Daly (min)", "goodput at Daly (%)"],
        rows,
        note="At Llama 3's job MTBF; checkpoint and restart costs are assumptions.",
        stamp="R = {restart} min",
        fields={"restart": f"{RESTART_MINUTES:g}"},
    )


def monte_carlo_table() -> Table:
    """Goodput by the closed form against a failure-by-failure simulation."""
    m, rows = _mtbf_min(), []
    for cost_s in _CHECKPOINT_COSTS_S:
        c = cost_s / 60
        for tau in (rel.daly_interval(c, m), 4 * rel.daly_interval(c, m)):
            closed = rel.goodput(tau, c, RESTART_MINUTES, m)
            sim = rel.simulate_goodput(
                tau, c, RESTART_MINUTES, m, FAILURES, np.random.default_rng(_SEED)
            )
            rows.append(
                [
                    round(cost_s),
                    round(tau, 1),
                    round(100 * closed, 2),
                    round(100 * sim, 2),
                    round(100 * (sim - closed) / closed, 2),
                ]
            )
    return Table(
        [
            "C (s)",
            "interval (min)",
            "closed form (%)",
            "simulated (%)",
            "difference (%)",
        ],
        rows,
        note="At Llama 3's job MTBF; intervals: Daly's optimum and four times it; "
        "the simulation draws exponential gaps between failures.",
        stamp="R = {restart} min; seed {seed}, {failures} failures",
        fields={
            "restart": f"{RESTART_MINUTES:g}",
            "seed": _SEED,
            "failures": f"{FAILURES:,}",
        },
    )


def async_gain_pts() -> float:
    """Goodput points gained by cutting ``C`` from the slow write to the snapshot."""
    return best_goodput_pct(ASYNC_SNAPSHOT_S) - best_goodput_pct(SYNC_WRITE_S)
