"""The compute-optimal allocation under each law, and a real run in its terms.

Two tables, shown by the book and printed by ``aiinfra scaling``: for a budget C,
the (N, D) each law calls compute-optimal (Kaplan's, Chinchilla's Approach 3 as
published, Besiroglu et al.'s refit and this package's fit); and for a published
run (Llama 3 405B), how far its (N, D) lies from each optimum, what loss each law
predicts for it, and how much compute a compute-optimal model would need to reach
that loss. Kaplan's law was fitted on another dataset and tokenizer: its losses are
not comparable and are not shown.
"""

from __future__ import annotations

from typing import Any

from aiinfra.report import Table

from . import stamp
from .laws import (
    BESIROGLU,
    BESIROGLU_STANDARD_ERRORS,
    CHINCHILLA,
    CHINCHILLA_REPORTED_A,
    CHINCHILLA_TOKENS_PER_PARAMETER,
    CHINCHILLA_UNROUNDED,
    FLOPS_PER_PARAMETER_TOKEN,
    LLAMA3_405B,
    ChinchillaLaw,
    TrainingRun,
    kaplan_compute_optimal,
)

KAPLAN = "Kaplan et al. 2020"


def published_laws(fitted: ChinchillaLaw | None = None) -> list[ChinchillaLaw]:
    """Chinchilla's law as printed and unrounded, Besiroglu et al.'s, ``fitted``."""
    laws = [CHINCHILLA, CHINCHILLA_UNROUNDED, BESIROGLU]
    return laws + ([fitted] if fitted is not None else [])


def allocation_table(c: float, fitted: ChinchillaLaw | None = None) -> Table:
    """N_opt, D_opt, D/N and the predicted loss at budget ``c`` under each law.

    Args:
        c: training FLOPs C.
        fitted: this package's fit to the published runs, if at hand.

    Raises:
        ValueError: ``c`` is not > 0.
    """
    n, d = kaplan_compute_optimal(c)
    rows = [[KAPLAN, n, d, d / n, "-"]]
    for law in published_laws(fitted):
        n, d = law.compute_optimal(c)
        rows.append([law.source, n, d, d / n, law.optimal_loss(c)])
    return Table(
        ["law", "parameters N", "tokens D", "tokens per parameter", "loss"],
        rows,
        note="Compute-optimal allocation for the budget C = 6ND; Kaplan's "
        "compute-efficient size N = 1.3e9 (C / PF-day)^0.73, D = C / (6N); the loss "
        "is nats per token on Chinchilla's data.",
        stamp=f"C = {c:.3g} FLOPs",
    )


def run_table(
    run: TrainingRun = LLAMA3_405B, fitted: ChinchillaLaw | None = None
) -> Table:
    """A published run against each law's optimum at the run's own budget 6ND.

    Columns: the law's N_opt and D_opt/N_opt, the run's N over N_opt, the loss the
    law predicts for the run and for its optimum, and the compute a compute-optimal
    model needs to reach the run's predicted loss, as a fraction of the run's.

    Args:
        run: the published run.
        fitted: this package's fit to the published runs, if at hand.
    """
    c = FLOPS_PER_PARAMETER_TOKEN * run.n * run.d
    n_k, d_k = kaplan_compute_optimal(c)
    rows = [[KAPLAN, n_k, d_k / n_k, run.n / n_k, "-", "-", "-"]]
    for law in published_laws(fitted):
        n, d = law.compute_optimal(c)
        loss = law.loss(run.n, run.d)
        rows.append(
            [
                law.source,
                n,
                d / n,
                run.n / n,
                loss,
                law.optimal_loss(c),
                law.compute_for_loss(loss) / c,
            ]
        )
    return Table(
        [
            "law",
            "optimal N",
            "optimal tokens per parameter",
            "run N / optimal N",
            "loss of the run",
            "optimal loss",
            "compute for the run's loss",
        ],
        rows,
        note=f"The run's own budget C = 6ND; Chinchilla's rule of thumb is about "
        f"{CHINCHILLA_TOKENS_PER_PARAMETER} tokens per parameter. The last column is "
        "the budget at which a compute-optimal model predicts the run's loss, as a "
        "fraction of the run's budget.",
        stamp="{run}: N = {n}, D = {d}, {ratio} tokens per parameter, C = {c} FLOPs",
        fields={
            "run": run.name,
            "n": f"{run.n:.3g}",
            "d": f"{run.d:.3g}",
            "ratio": f"{run.tokens_per_parameter:.1f}",
            "c": f"{c:.3g}",
        },
    )


def fit_table(result: dict[str, Any]) -> Table:
    """The fit with 95 % bootstrap intervals, Besiroglu et al.'s and Chinchilla's.

    Args:
        result: a :func:`aiinfra.scaling.stamp.refit` result.
    """
    law, boot = stamp.fitted_law(result), stamp.bootstrap_rows(result)
    columns = [*boot.T, boot[:, 4] / (boot[:, 3] + boot[:, 4])]  # E A B alpha beta a
    rows = []
    for i, name in enumerate((*stamp.LAW_FIELDS, "a = beta/(alpha+beta)")):
        lo, hi = stamp.percentile_interval(columns[i])
        if i < 5:
            mine = getattr(law, name)
            theirs = (
                f"{getattr(BESIROGLU, name):.4g} ± {BESIROGLU_STANDARD_ERRORS[i]:.2g}"
            )
            published = f"{getattr(CHINCHILLA, name):.4g}"
        else:
            mine = law.exponents[0]
            theirs = f"{BESIROGLU.exponents[0]:.3f}"
            published = f"{CHINCHILLA.exponents[0]:.3f} ({CHINCHILLA_REPORTED_A})"
        rows.append([name, f"{mine:.4g}", f"{lo:.4g} – {hi:.4g}", theirs, published])
    fit = result["fits"]["besiroglu"]
    return Table(
        [
            "parameter",
            "this fit",
            "95 % bootstrap interval",
            "Besiroglu et al. 2024 (± s.e.)",
            "Hoffmann et al. 2022",
        ],
        rows,
        note="Huber loss (delta = 1e-3) on log-loss residuals, L-BFGS from the "
        "paper's grid of starts; intervals: percentiles of the bootstrap refits. "
        "Hoffmann et al.'s a is computed from the printed parameters, their reported "
        "value in brackets.",
        stamp="{runs} runs, {resamples} resamples; {date}, torch {torch}",
        fields={
            "runs": fit["points"],
            "resamples": len(result["bootstrap"]),
            "date": str(result["stamp"]["date"])[:10],
            "torch": result["stamp"]["torch"],
        },
    )


def sensitivity_table(
    result: dict[str, Any], c: float = LLAMA3_405B.reported_flops
) -> Table:
    """The fit on each subset of the runs, and its N_opt and D/N at budget ``c``.

    Args:
        result: a :func:`aiinfra.scaling.stamp.refit` result.
        c: the budget of the last two columns, FLOPs.
    """
    rows = []
    for key, fit in result["fits"].items():
        law = stamp.fitted_law(result, key)
        n, d = law.compute_optimal(c)
        rows.append(
            [
                fit["label"],
                fit["points"],
                *(getattr(law, k) for k in stamp.LAW_FIELDS),
                law.exponents[0],
                n / 1e9,
                d / n,
            ]
        )
    return Table(
        ["runs", "points", *stamp.LAW_FIELDS, "a", "N_opt (B)", "tokens per parameter"],
        rows,
        note="Each subset refitted from the paper's grid of starts; the last two "
        "columns: the compute-optimal model each fit gives for the budget C.",
        stamp=f"C = {c:.3g} FLOPs",
    )
