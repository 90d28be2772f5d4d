"""What ``docs/models/scaling_laws.rst`` shows: its values, tables, figures.

The fit to the published runs is read from the stamped result ``scaling-fit``, which
``aiinfra scaling --refit`` writes (the paper's 4,500 starts and 1,000 bootstrap
resamples take minutes); everything else is computed from the laws at build time.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.report import Table
from aiinfra.scaling import figures, report, stamp
from aiinfra.scaling.data import besiroglu_subset, chinchilla_points
from aiinfra.scaling.laws import (
    BESIROGLU,
    CHINCHILLA,
    CHINCHILLA_70B,
    CHINCHILLA_APPROACH3_GOPHER_N,
    CHINCHILLA_REPORTED_A,
    CHINCHILLA_UNROUNDED,
    FLOPS_PER_PARAMETER_TOKEN,
    KAPLAN_N_OPT_EXPONENT,
    LLAMA3_405B,
    LLAMA3_OWN_OPTIMUM,
    ChinchillaLaw,
    kaplan_compute_optimal,
)

# Dubey et al. 2024, Table 4: about 400 TFLOP/s per H100 (41 % of the BF16 peak)
# on 16,384 GPUs; the GPU-days below assume this MFU for the whole run.
LLAMA3_MFU = 0.41
LLAMA3_GPUS = 16384
SECONDS_PER_DAY = 86400


@functools.cache
def _result() -> dict[str, Any]:
    return results.load(stamp.KIND, "cpu")


def _fit(key: str = "besiroglu") -> ChinchillaLaw:
    return stamp.fitted_law(_result(), key)


def _points() -> Any:
    return besiroglu_subset(chinchilla_points())


# Kaplan against Chinchilla


def kaplan_exponent() -> float:
    """Kaplan's N_opt ~ C^a exponent, 0.73."""
    return KAPLAN_N_OPT_EXPONENT


def chinchilla_exponent() -> float:
    """The exponent a = beta / (alpha + beta) of Approach 3's printed parameters."""
    return CHINCHILLA.exponents[0]


def chinchilla_reported_exponent() -> float:
    """The exponent a as Hoffmann et al. report it for Approach 3 (Table 2)."""
    return CHINCHILLA_REPORTED_A


def fit_exponent() -> float:
    """The exponent a = beta / (alpha + beta) of this package's fit."""
    return _fit().exponents[0]


def frontier_figure() -> Figure:
    """N_opt(C) under Kaplan, Chinchilla (published), Besiroglu and this fit."""
    rows = stamp.bootstrap_rows(_result())
    return figures.frontier_figure([CHINCHILLA, BESIROGLU, _fit()], rows)


def gopher_budget() -> float:
    """Chinchilla's (and Gopher's) training budget, FLOPs."""
    return CHINCHILLA_70B.reported_flops


def kaplan_n_at_gopher_budget() -> float:
    """Kaplan's compute-efficient N at Gopher's budget, billions."""
    return kaplan_compute_optimal(CHINCHILLA_70B.reported_flops)[0] / 1e9


def approach3_n_at_gopher_budget() -> float:
    """Approach 3's (published) N_opt at Gopher's budget, billions."""
    return CHINCHILLA.compute_optimal(CHINCHILLA_70B.reported_flops)[0] / 1e9


def approach3_tokens_per_parameter_at_gopher_budget() -> float:
    """D_opt / N_opt of Approach 3 (published) at Gopher's budget."""
    n, d = CHINCHILLA.compute_optimal(CHINCHILLA_70B.reported_flops)
    return d / n


def approach3_unrounded_n_at_gopher_budget() -> float:
    """Approach 3 with unrounded exponents: N_opt at Gopher's budget, billions."""
    return CHINCHILLA_UNROUNDED.compute_optimal(CHINCHILLA_70B.reported_flops)[0] / 1e9


def approach3_unrounded_exponent() -> float:
    """``a`` of Approach 3 with unrounded exponents."""
    return CHINCHILLA_UNROUNDED.exponents[0]


def approach3_published_n_at_gopher_budget() -> float:
    """Hoffmann et al.'s own Table 3 value for Approach 3 at Gopher's budget, B."""
    return CHINCHILLA_APPROACH3_GOPHER_N / 1e9


def llama_own_optimum_b() -> float:
    """Llama 3's own iso-FLOP optimum at 3.8e25 FLOPs, billions of parameters."""
    return LLAMA3_OWN_OPTIMUM.n / 1e9


def llama_own_optimum_tokens_t() -> float:
    """Its tokens, trillions."""
    return LLAMA3_OWN_OPTIMUM.d / 1e12


def llama_own_tokens_per_parameter() -> float:
    """Tokens per parameter of Llama 3's own optimum."""
    return LLAMA3_OWN_OPTIMUM.tokens_per_parameter


def fit_n_at_gopher_budget() -> float:
    """This fit's N_opt at Gopher's budget, billions."""
    return _fit().compute_optimal(CHINCHILLA_70B.reported_flops)[0] / 1e9


def chinchilla_70b_loss_excess() -> float:
    """How much more loss, %, Approach 3 predicts for 70B than for its optimum."""
    c = CHINCHILLA_70B.reported_flops
    return 100 * (
        CHINCHILLA.iso_flop_loss(c, CHINCHILLA_70B.n) / CHINCHILLA.optimal_loss(c) - 1
    )


# The compute-optimal allocation


def iso_flop_figure() -> Figure:
    """Approach 3's loss along N at five budgets, with the closed-form optima."""
    return figures.iso_flop_figure(CHINCHILLA, (1e19, 1e20, 1e21, 1e22, 1e23))


def approach3_g() -> float:
    """G of Approach 3's published parameters."""
    return CHINCHILLA.G


# Fitting the law to the published runs


def fit_points() -> int:
    """Runs the main fit uses (Besiroglu et al.'s subset)."""
    return _result()["fits"]["besiroglu"]["points"]


def fit_resamples() -> int:
    """Bootstrap resamples."""
    return len(_result()["bootstrap"])


def fit_starts() -> int:
    """L-BFGS starts of the paper's grid."""
    grid = _result()["config"]["grid"]
    return int(torch.tensor([len(v) for v in grid.values()]).prod())


def fit_table() -> Table:
    """This fit with its 95 % bootstrap intervals, Besiroglu et al.'s, Chinchilla's."""
    return report.fit_table(_result())


def fit_figure() -> Figure:
    """The runs by budget against this fit and the published law, and residuals."""
    return figures.fit_figure(_points(), [_fit(), CHINCHILLA, BESIROGLU])


def residual_median(source: str) -> float:
    """Median of log predicted - log observed loss over the runs, % (by law)."""
    law = {"fit": _fit(), "chinchilla": CHINCHILLA, "besiroglu": BESIROGLU}[source]
    return 100 * float(figures.residuals(law, _points()).median())


def objective_ratio() -> float:
    """Huber objective of the published parameters over this fit's."""
    from aiinfra.scaling.fit import objective

    x = figures.law_x(CHINCHILLA)
    return float(objective(x, _points())) / _result()["fits"]["besiroglu"]["objective"]


def sensitivity_table() -> Table:
    """The fit on each subset of the runs: parameters and N_opt at Llama 3's budget."""
    return report.sensitivity_table(_result())


def sensitivity_beta(key: str) -> float:
    """The exponent beta fitted to the subset ``key`` of the runs (``SUBSETS``)."""
    return _fit(key).beta


def sensitivity_alpha(key: str) -> float:
    """The exponent alpha fitted to the subset ``key`` of the runs."""
    return _fit(key).alpha


def sensitivity_n_opt(key: str) -> float:
    """N_opt at Llama 3 405B's budget by the fit to the subset ``key``, billions."""
    return _fit(key).compute_optimal(LLAMA3_405B.reported_flops)[0] / 1e9


def bootstrap_n_opt(q: float) -> float:
    """The ``q`` quantile of N_opt at Llama 3 405B's budget over the bootstrap, B."""
    rows = stamp.bootstrap_rows(_result())
    laws = [ChinchillaLaw(*row.tolist()) for row in rows]
    n = torch.tensor(
        [law.compute_optimal(LLAMA3_405B.reported_flops)[0] for law in laws]
    )
    return float(torch.quantile(n, q)) / 1e9


def largest_budget() -> float:
    """The largest training budget among the runs, FLOPs."""
    return float(chinchilla_points().flops.max())


# What Llama 3 did


def allocation_table() -> Table:
    """The compute-optimal N and D for Llama 3 405B's budget under each law."""
    return report.allocation_table(LLAMA3_405B.reported_flops, _fit())


def llama_table() -> Table:
    """Llama 3 405B against each law's optimum at its own budget."""
    return report.run_table(LLAMA3_405B, _fit())


def overtraining_figure() -> Figure:
    """Extra training compute of a smaller-than-optimal model, per law."""
    return figures.overtraining_figure([CHINCHILLA, BESIROGLU, _fit()])


def llama_tokens_per_parameter() -> float:
    """Llama 3 405B's D / N."""
    return LLAMA3_405B.tokens_per_parameter


def _llama_budget() -> float:
    """6ND of Llama 3 405B, FLOPs."""
    return FLOPS_PER_PARAMETER_TOKEN * LLAMA3_405B.n * LLAMA3_405B.d


def llama_size_over_fit_optimum() -> float:
    """Llama 3 405B's N over this fit's N_opt at the same budget."""
    return LLAMA3_405B.n / _fit().compute_optimal(_llama_budget())[0]


def llama_extra_compute() -> float:
    """Compute Llama 3 405B spends beyond a compute-optimal model of its loss, %."""
    law = _fit()
    return 100 * (
        _llama_budget() / law.compute_for_loss(law.loss(LLAMA3_405B.n, LLAMA3_405B.d))
        - 1
    )


def llama_gpu_days() -> float:
    """H100-days of 6ND at Dubey et al.'s MFU, millions."""
    rate = LLAMA3_MFU * GPUS["H100"].bf16_flops
    return _llama_budget() / rate / SECONDS_PER_DAY / 1e6


def llama_days_on_cluster() -> float:
    """Days of 6ND on 16,384 H100s at Dubey et al.'s MFU."""
    return llama_gpu_days() * 1e6 / LLAMA3_GPUS


def llama_mfu_percent() -> float:
    """The MFU assumed, %."""
    return 100 * LLAMA3_MFU
