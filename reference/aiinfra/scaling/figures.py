"""The scaling-law figures: frontiers, iso-FLOP curves, residuals, over-training.

Each function takes the laws (and, where it shows them, the runs or the bootstrap
refits) and returns a matplotlib ``Figure``; matplotlib is imported inside, so the
command line never loads it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from .data import ScalingPoints
from .fit import log_predicted_loss
from .laws import (
    CHINCHILLA_70B,
    FLOPS_PER_PARAMETER_TOKEN,
    LLAMA3_405B,
    ChinchillaLaw,
    TrainingRun,
    kaplan_compute_optimal,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The iso-FLOP budgets of Hoffmann et al.'s Figure 3/4 that the runs cluster at.
ISO_FLOP_BUDGETS = (6e18, 1e19, 3e19, 6e19, 1e20, 3e20, 6e20, 1e21, 3e21)


def _span(low: float, high: float, steps: int = 200) -> torch.Tensor:
    return torch.logspace(math.log10(low), math.log10(high), steps, dtype=torch.float64)


def law_x(law: ChinchillaLaw) -> torch.Tensor:
    """The row (a, b, e, alpha, beta) of a law, ``(1, 5)``."""
    return torch.tensor(
        [[math.log(law.A), math.log(law.B), math.log(law.E), law.alpha, law.beta]],
        dtype=torch.float64,
    )


def residuals(law: ChinchillaLaw, points: ScalingPoints) -> torch.Tensor:
    """Log L_pred - log L of each run, ``(P,)``."""
    pred = log_predicted_loss(law_x(law), points.n.log(), points.d.log())[0]
    return pred - points.loss.log()


def nearest_budget(flops: torch.Tensor, budgets: tuple[float, ...]) -> torch.Tensor:
    """Index of the budget nearest each run's C in log space; -1 if > 0.15 dex off."""
    logs = torch.tensor(budgets, dtype=torch.float64).log10()
    dist = (flops.log10()[:, None] - logs).abs()  # (P, budgets)
    best = dist.argmin(-1)
    return torch.where(dist.min(-1).values <= 0.15, best, -1)


def frontier_figure(
    laws: list[ChinchillaLaw], band: torch.Tensor | None = None
) -> Figure:
    """N_opt(C) under Kaplan and each law, with Chinchilla 70B and Llama 3 405B.

    Args:
        laws: Chinchilla-form laws, each drawn with its ``source`` as label.
        band: ``(R, 5)`` bootstrap refits (E, A, B, alpha, beta) of the last law,
            drawn as its 95 % band; ``None``: no band.
    """
    from matplotlib.figure import Figure

    c = _span(1e18, 1e26)
    fig = Figure(figsize=(6, 3.8), layout="constrained")
    ax = fig.add_subplot()
    kaplan = [kaplan_compute_optimal(float(x))[0] for x in c]
    ax.plot(c, kaplan, "k:", label="Kaplan et al. 2020 (N ~ C^0.73)")
    for i, law in enumerate(laws):
        n_opt = [law.compute_optimal(float(x))[0] for x in c]
        dashed = i % 2 == 1  # drawn on top, so that a law under another shows
        ax.plot(
            c,
            n_opt,
            "--" if dashed else "-",
            color=f"C{i}",
            label=law.source,
            zorder=3 if dashed else 2,
        )
    if band is not None:
        alpha, beta = band[:, 3:4], band[:, 4:5]  # (R, 1)
        g = (alpha * band[:, 1:2] / (beta * band[:, 2:3])) ** (1 / (alpha + beta))
        n = g * (c / FLOPS_PER_PARAMETER_TOKEN) ** (beta / (alpha + beta))  # (R, C)
        q = torch.tensor([0.025, 0.975], dtype=torch.float64)
        lo, hi = torch.quantile(n, q, dim=0)
        ax.fill_between(c, lo, hi, color="C2", alpha=0.25, lw=0, label="95 % bootstrap")
    for run, marker in ((CHINCHILLA_70B, "o"), (LLAMA3_405B, "*")):
        ax.plot(run.reported_flops, run.n, marker, color="C3", ms=9, label=run.name)
    ax.set(xscale="log", yscale="log", xlabel="training FLOPs C")
    ax.set_ylabel("compute-optimal parameters N")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def iso_flop_figure(law: ChinchillaLaw, budgets: tuple[float, ...]) -> Figure:
    """L along N at fixed budgets under ``law``, with each closed-form optimum.

    Args:
        law: the law drawn.
        budgets: the budgets C, one curve each.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.add_subplot()
    optima = []
    for i, c in enumerate(budgets):
        n = _span(1e7, 1e13)
        ax.plot(n, law.iso_flop_loss(c, n), color=f"C{i}", label=f"C = {c:.0e}")
        n_opt, _ = law.compute_optimal(c)
        optima.append((n_opt, law.optimal_loss(c)))
    ax.plot(*zip(*optima, strict=True), "ko--", ms=4, label="optimum (closed form)")
    ax.set(xscale="log", xlabel="parameters N (D = C / 6N)", ylabel="predicted loss")
    ax.set_ylim(law.E, law.E + 2.5)
    ax.legend(fontsize=7, ncols=2)
    ax.grid(alpha=0.3)
    return fig


def fit_figure(points: ScalingPoints, laws: list[ChinchillaLaw]) -> Figure:
    """The runs by budget with two laws' iso-FLOP curves, and every law's residuals.

    Args:
        points: the runs.
        laws: the first is drawn solid, the second dashed; the residuals of all
            are shown.
    """
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax, rx = fig.subplots(1, 2, width_ratios=(2, 1))
    which = nearest_budget(points.flops, ISO_FLOP_BUDGETS)
    colours = colormaps["viridis"](torch.linspace(0, 0.9, len(ISO_FLOP_BUDGETS)))
    n = _span(float(points.n.min()) / 2, float(points.n.max()) * 2)
    ax.plot(points.n[which < 0], points.loss[which < 0], ".", color="0.75", ms=4)
    for i, c in enumerate(ISO_FLOP_BUDGETS):
        mine = which == i
        ax.plot(points.n[mine], points.loss[mine], ".", color=colours[i], ms=4)
        for law, style in zip(laws[:2], ("-", "--"), strict=False):
            ax.plot(n, law.iso_flop_loss(c, n), style, color=colours[i], lw=0.8)
    for law, style in zip(laws[:2], ("-", "--"), strict=False):
        ax.plot([], [], style, color="k", lw=0.8, label=law.source)
    ax.legend(fontsize=7, title="runs coloured by budget C", title_fontsize=7)
    ax.set(xscale="log", xlabel="parameters N", ylabel="final loss")
    ax.set_ylim(float(points.loss.min()) - 0.05, 3.6)
    res = [residuals(law, points) for law in laws]
    rx.boxplot([r.tolist() for r in res], flierprops={"ms": 2})
    names = [law.source.replace(" et al. ", "\n") for law in laws]
    rx.set_xticks(range(1, len(laws) + 1), names, fontsize=7)
    rx.axhline(0, color="k", lw=0.5)
    rx.set_ylabel("log predicted - log observed loss")
    rx.set_ylim(-0.08, 0.08)
    return fig


def overtraining_figure(
    laws: list[ChinchillaLaw], run: TrainingRun = LLAMA3_405B
) -> Figure:
    """The training compute a smaller model needs to match the optimum's loss.

    At the run's budget C, a model of k N_opt parameters (k < 1) reaches the
    optimum's loss after more tokens; the extra compute, relative to C, against
    k, with the run's own k marked. Inference costs about 2N FLOPs per token, so
    k is also the inference cost relative to the compute-optimal model.
    """
    from matplotlib.figure import Figure

    c = FLOPS_PER_PARAMETER_TOKEN * run.n * run.d
    k = torch.linspace(0.35, 1.0, 66, dtype=torch.float64)
    fig = Figure(figsize=(6, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for i, law in enumerate(laws):
        n_opt, _ = law.compute_optimal(c)
        target = law.optimal_loss(c)
        extra = [
            FLOPS_PER_PARAMETER_TOKEN * n * law.tokens_to_match(n, target) / c - 1
            for n in (k * n_opt).tolist()
        ]
        style = ("-", "--")[i % 2]
        ax.plot(k, [100 * e for e in extra], style, color=f"C{i}", label=law.source)
        k_run = run.n / n_opt
        if k_run <= 1:
            d = law.tokens_to_match(run.n, target)
            extra_run = FLOPS_PER_PARAMETER_TOKEN * run.n * d / c - 1
            ax.plot(k_run, 100 * extra_run, "*", color=f"C{i}", ms=10)
    ax.set(xlabel="model size / compute-optimal size (= inference FLOPs ratio)")
    ax.set_ylabel("extra training compute, %")
    ax.set_ylim(0, None)
    ax.legend(fontsize=7, title=f"{run.name} (star), C = {c:.2g}", title_fontsize=7)
    ax.grid(alpha=0.3)
    return fig
