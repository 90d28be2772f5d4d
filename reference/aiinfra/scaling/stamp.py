"""The fit to the published runs, made once and kept as a stamped result for the book.

The paper's grid is 4,500 starts and the bootstrap refits 1,000 resamples: minutes
on a CPU, too slow for every build of the book. ``aiinfra scaling --refit --stamp``
runs :func:`refit` and stores the result as the kind ``scaling-fit`` of
:mod:`aiinfra.results`, which the book and the command line read. Every fit is on
one subset of the runs (:data:`SUBSETS`):
Besiroglu et al.'s (all but the 5 of highest loss) and three that test which runs
the fit depends on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiinfra import progress

from .laws import ChinchillaLaw

if TYPE_CHECKING:  # the fit needs torch; reading a stored fit does not
    import torch

    from .data import ScalingPoints

KIND = "scaling-fit"  # its kind of aiinfra.results
RESAMPLES = 1000
SEED = 0
SMALL_N = 2e8  # "the smallest models": under 200M parameters
LARGE_C = 1.2e21  # "the largest budgets": over 1.2e21 FLOPs


def _besiroglu(points: ScalingPoints) -> ScalingPoints:
    from .data import besiroglu_subset

    return besiroglu_subset(points)


SUBSETS: dict[str, tuple[str, Callable[[ScalingPoints], ScalingPoints]]] = {
    "besiroglu": ("all but the 5 of highest loss", _besiroglu),
    "all": ("all 245 runs", lambda p: p),
    "no_small": (
        "without models under 200M parameters",
        lambda p: _besiroglu(p).subset(_besiroglu(p).n >= SMALL_N),
    ),
    "no_large": (
        "without budgets over 1.2e21 FLOPs",
        lambda p: _besiroglu(p).subset(_besiroglu(p).flops <= LARGE_C),
    ),
}
LAW_FIELDS = ("E", "A", "B", "alpha", "beta")


def law_dict(law: ChinchillaLaw) -> dict[str, float]:
    """The law's five parameters by name."""
    return {k: getattr(law, k) for k in LAW_FIELDS}


def refit(
    resamples: int = RESAMPLES, seed: int = SEED, max_iter: int = 500
) -> dict[str, Any]:
    """Fit every subset from the paper's grid and bootstrap Besiroglu et al.'s.

    Args:
        resamples: bootstrap resamples of the main subset.
        seed: the seed of the resamples' ``torch.Generator``.
        max_iter: L-BFGS iterations at most per start.

    Returns:
        ``{"config", "fits", "bootstrap"}``, JSON-ready (``results.write`` stamps
        it).
    """
    import torch

    from .data import besiroglu_subset, chinchilla_points
    from .fit import HUBER_DELTA, PAPER_GRID, bootstrap, fit_law, grid_starts

    points = chinchilla_points()
    fits = {}
    for key, (label, select) in progress.track(SUBSETS.items(), "subsets fitted"):
        subset = select(points)
        law, value = fit_law(subset, grid_starts(), max_iter)
        fits[key] = {
            "label": label,
            "points": len(subset),
            "objective": value,
            **law_dict(law),
        }
    main = ChinchillaLaw(**{k: fits["besiroglu"][k] for k in LAW_FIELDS})
    generator = torch.Generator().manual_seed(seed)
    rows = bootstrap(besiroglu_subset(points), main, resamples, generator, max_iter)
    return {
        "config": {
            "grid": PAPER_GRID,
            "huber_delta": HUBER_DELTA,
            "max_iter": max_iter,
            "resamples": resamples,
            "seed": seed,
        },
        "fits": fits,
        "bootstrap": [[float(f"{v:.7g}") for v in row] for row in rows.tolist()],
    }


def fitted_law(result: dict[str, Any], key: str = "besiroglu") -> ChinchillaLaw:
    """The law fitted to the subset ``key`` of a :func:`refit` result."""
    fit = result["fits"][key]
    return ChinchillaLaw(**{k: fit[k] for k in LAW_FIELDS}, source="this fit")


def bootstrap_rows(result: dict[str, Any]) -> torch.Tensor:
    """The bootstrap refits, ``(R, 5)`` (E, A, B, alpha, beta), float64."""
    import torch

    return torch.tensor(result["bootstrap"], dtype=torch.float64)


def percentile_interval(
    values: torch.Tensor, level: float = 0.95
) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap values ``(R,)``."""
    import torch

    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=values.dtype)
    lo, hi = torch.quantile(values, q).tolist()
    return lo, hi
