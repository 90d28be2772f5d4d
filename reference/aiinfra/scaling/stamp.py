"""The fit to the published runs, made once and kept as JSON for the book.

The paper's grid is 4,500 starts and the bootstrap refits 1,000 resamples: minutes
on a CPU, too slow for every build of the book. ``aiinfra scaling --refit PATH``
runs :func:`refit` and writes the result; the book and the command line read it
with :func:`load_fit`. Every fit is on one subset of the runs (:data:`SUBSETS`):
Besiroglu et al.'s (all but the 5 of highest loss) and three that test which runs
the fit depends on.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .data import ScalingPoints, besiroglu_subset, chinchilla_points
from .fit import HUBER_DELTA, PAPER_GRID, bootstrap, fit_law, grid_starts
from .laws import ChinchillaLaw

# The book's copy, when the package runs from its repository.
DEFAULT_FIT = (
    Path(__file__).resolve().parents[3] / "docs" / "_data" / "scaling-fit.json"
)
RESAMPLES = 1000
SEED = 0
SMALL_N = 2e8  # "the smallest models": under 200M parameters
LARGE_C = 1.2e21  # "the largest budgets": over 1.2e21 FLOPs

SUBSETS: dict[str, tuple[str, Callable[[ScalingPoints], ScalingPoints]]] = {
    "besiroglu": ("all but the 5 of highest loss", besiroglu_subset),
    "all": ("all 245 runs", lambda p: p),
    "no_small": (
        "without models under 200M parameters",
        lambda p: besiroglu_subset(p).subset(besiroglu_subset(p).n >= SMALL_N),
    ),
    "no_large": (
        "without budgets over 1.2e21 FLOPs",
        lambda p: besiroglu_subset(p).subset(besiroglu_subset(p).flops <= LARGE_C),
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
        ``{"stamp", "config", "fits", "bootstrap"}``, JSON-ready.
    """
    points = chinchilla_points()
    fits = {}
    for key, (label, select) in SUBSETS.items():
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
        "stamp": f"{datetime.date.today().isoformat()}, torch {torch.__version__}",
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


def write_fit(path: Path, result: dict[str, Any]) -> None:
    """Write :func:`refit`'s result as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def load_fit(path: Path = DEFAULT_FIT) -> dict[str, Any]:
    """Read a result of :func:`refit`.

    Raises:
        FileNotFoundError: no file at ``path``; it names the command that makes it.
    """
    if not path.is_file():
        raise FileNotFoundError(
            f"no scaling-law fit at {path}: make it with aiinfra scaling --refit {path}"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def fitted_law(result: dict[str, Any], key: str = "besiroglu") -> ChinchillaLaw:
    """The law fitted to the subset ``key`` of a :func:`refit` result."""
    fit = result["fits"][key]
    return ChinchillaLaw(**{k: fit[k] for k in LAW_FIELDS}, source="this fit")


def bootstrap_rows(result: dict[str, Any]) -> torch.Tensor:
    """The bootstrap refits, ``(R, 5)`` (E, A, B, alpha, beta), float64."""
    return torch.tensor(result["bootstrap"], dtype=torch.float64)


def percentile_interval(
    values: torch.Tensor, level: float = 0.95
) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap values ``(R,)``."""
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=values.dtype)
    lo, hi = torch.quantile(values, q).tolist()
    return lo, hi
