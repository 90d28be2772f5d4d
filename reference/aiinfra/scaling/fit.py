"""Fitting L(N, D) = E + A/N^alpha + B/D^beta to training runs, as Chinchilla did.

Hoffmann et al. (2022, Sec. D.2) minimise, over (a, b, e, alpha, beta),

    sum_i Huber_delta( LSE(a - alpha log N_i, b - beta log D_i, e) - log L_i ),

with A = e^a, B = e^b, E = e^e and delta = 1e-3: the log of the predicted loss is a
log-sum-exp, which keeps the three terms positive and the problem smooth, and the
Huber loss with so small a delta is nearly an absolute error, robust to outliers.
They run L-BFGS from a grid of starts and keep the best end point; Besiroglu et al.
(2024) do the same on the runs read off Hoffmann et al.'s Figure 4, and estimate the
uncertainty by refitting resamples of the runs (the bootstrap). Here the starts, or
the resamples, are the rows of one batch (:func:`aiinfra.scaling.lbfgs.lbfgs`).
"""

from __future__ import annotations

import itertools
import math

import torch

from .data import ScalingPoints
from .laws import ChinchillaLaw
from .lbfgs import lbfgs

HUBER_DELTA = 1e-3
# Hoffmann et al., Sec. D.2: alpha, beta in {0, 0.5, ..., 2}, e in {-1, -0.5, ..., 1},
# a, b in {0, 5, ..., 25}: 4,500 starts (the order of a row: a, b, e, alpha, beta).
PAPER_GRID = {
    "a": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "b": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "e": (-1.0, -0.5, 0.0, 0.5, 1.0),
    "alpha": (0.0, 0.5, 1.0, 1.5, 2.0),
    "beta": (0.0, 0.5, 1.0, 1.5, 2.0),
}


def huber(r: torch.Tensor, delta: float = HUBER_DELTA) -> torch.Tensor:
    """Huber's loss: ``r^2 / 2`` up to ``delta``, ``delta (|r| - delta / 2)`` beyond."""
    a = r.abs()
    return torch.where(a <= delta, 0.5 * r**2, delta * (a - 0.5 * delta))


def log_predicted_loss(
    x: torch.Tensor, log_n: torch.Tensor, log_d: torch.Tensor
) -> torch.Tensor:
    """Log L(N, D) = LSE(a - alpha log N, b - beta log D, e), per start and run.

    Args:
        x: ``(S, 5)`` rows (a, b, e, alpha, beta).
        log_n: ``(P,)`` logs of the runs' N.
        log_d: ``(P,)`` logs of the runs' D.

    Returns:
        ``(S, P)``.
    """
    a, b, e, alpha, beta = x.unbind(-1)  # (S,) each
    terms = torch.stack(
        [
            a[:, None] - alpha[:, None] * log_n,  # (S, P)
            b[:, None] - beta[:, None] * log_d,
            e[:, None].expand(-1, log_n.shape[0]),
        ]
    )  # (3, S, P)
    return torch.logsumexp(terms, dim=0)


def objective(
    x: torch.Tensor, points: ScalingPoints, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Each row's sum of Huber losses of its log-loss residuals, ``(S,)``.

    Args:
        x: ``(S, 5)`` rows (a, b, e, alpha, beta).
        points: the runs (P of them).
        weights: ``(S, P)`` times each run counts per row (a bootstrap resample);
            ``None``: once each.
    """
    r = log_predicted_loss(x, points.n.log(), points.d.log()) - points.loss.log()
    h = huber(r)  # (S, P)
    return (h if weights is None else h * weights).sum(-1)


def to_law(x: torch.Tensor, source: str = "") -> ChinchillaLaw:
    """The law of one row (a, b, e, alpha, beta): A = e^a, B = e^b, E = e^e."""
    a, b, e, alpha, beta = (float(v) for v in x)
    return ChinchillaLaw(
        E=math.exp(e),
        A=math.exp(a),
        B=math.exp(b),
        alpha=alpha,
        beta=beta,
        source=source,
    )


def grid_starts(
    grid: dict[str, tuple[float, ...]] = PAPER_GRID,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Every combination of the grid's values, ``(S, 5)`` rows (a, b, e, alpha, beta).

    Raises:
        ValueError: the grid lacks one of the five names or has an empty axis.
    """
    names = ("a", "b", "e", "alpha", "beta")
    if set(grid) != set(names) or not all(grid[k] for k in names):
        raise ValueError(f"grid must give values for each of {names}, got {grid!r}")
    rows = list(itertools.product(*(grid[k] for k in names)))
    return torch.tensor(rows, dtype=torch.float64, device=device)


def fit_law(
    points: ScalingPoints,
    starts: torch.Tensor | None = None,
    max_iter: int = 500,
    source: str = "this fit",
) -> tuple[ChinchillaLaw, float]:
    """Fit E, A, B, alpha, beta to the runs: L-BFGS from every start, best end wins.

    Args:
        points: the runs (at least 5).
        starts: ``(S, 5)`` rows (a, b, e, alpha, beta); ``None``: the paper's grid.
        max_iter: L-BFGS iterations at most per start.
        source: the fitted law's label.

    Returns:
        ``(law, objective)``: the best fit and its summed Huber loss.

    Raises:
        ValueError: ``starts`` is not ``(S, 5)``, or no start ends finite.
    """
    if starts is None:
        starts = grid_starts(device=points.n.device)
    if starts.ndim != 2 or starts.shape[1] != 5:
        raise ValueError(f"starts must be (S, 5), got {tuple(starts.shape)}")
    x, fx = lbfgs(lambda z, _: objective(z, points), starts.to(points.n), max_iter)
    fx = torch.where(torch.isfinite(fx), fx, torch.inf)
    best = int(fx.argmin())
    if not bool(torch.isfinite(fx[best])):
        raise ValueError("no start reached a finite objective")
    return to_law(x[best], source), float(fx[best])


def bootstrap(
    points: ScalingPoints,
    law: ChinchillaLaw,
    resamples: int,
    generator: torch.Generator,
    max_iter: int = 500,
) -> torch.Tensor:
    """Refit ``resamples`` resamples of the runs (drawn with replacement).

    Each resample starts from ``law`` (the fit to all runs), as Besiroglu et al.'s
    bootstrap starts from one point.

    Args:
        points: the runs (P of them).
        law: the starting point of every refit.
        resamples: how many resamples R.
        generator: the random source of the resamples (on the points' device).
        max_iter: L-BFGS iterations at most per refit.

    Returns:
        ``(R, 5)`` fitted (E, A, B, alpha, beta), one row per resample.

    Raises:
        ValueError: ``resamples`` < 2.
    """
    if resamples < 2:
        raise ValueError(f"resamples must be >= 2, got {resamples!r}")
    p = len(points)
    picks = torch.randint(
        p, (resamples, p), generator=generator, device=generator.device
    ).to(points.n.device)
    weights = torch.zeros(resamples, p, dtype=points.n.dtype, device=points.n.device)
    weights.scatter_add_(1, picks, torch.ones_like(weights))  # (R, P) counts
    x0 = torch.tensor(
        [law.A, law.B, law.E, law.alpha, law.beta], dtype=torch.float64
    ).to(points.n)
    x0[:3] = x0[:3].log()
    x, _ = lbfgs(
        lambda z, rows: objective(z, points, weights[rows]),
        x0.expand(resamples, 5),
        max_iter,
    )
    return torch.cat([x[:, 2:3].exp(), x[:, :2].exp(), x[:, 3:]], dim=-1)
