"""The committed fit (the stamped result scaling-fit) against the code and the papers.

Ground truths: the objective recomputed from the stored parameters; L-BFGS started
at the stored optimum does not find a lower point (it is a minimum of today's
objective); Besiroglu et al.'s reported parameters (Table 1) for the bootstrap
intervals; Hoffmann et al.'s printed parameters for the claim that they fit the
runs poorly.
"""

from __future__ import annotations

import pytest
import torch
from aiinfra import results
from aiinfra.scaling import stamp
from aiinfra.scaling.data import besiroglu_subset, chinchilla_points
from aiinfra.scaling.figures import law_x
from aiinfra.scaling.fit import fit_law, objective
from aiinfra.scaling.laws import BESIROGLU, CHINCHILLA

RESULT = results.load(stamp.KIND, "cpu")
POINTS = besiroglu_subset(chinchilla_points())
LAW = stamp.fitted_law(RESULT)


def test_stored_objective_is_the_objective_of_the_stored_parameters():
    value = float(objective(law_x(LAW), POINTS))
    assert value == pytest.approx(RESULT["fits"]["besiroglu"]["objective"], rel=1e-9)
    assert RESULT["fits"]["besiroglu"]["points"] == len(POINTS) == 240


def test_stored_fit_is_a_minimum_of_the_objective():
    law, value = fit_law(POINTS, law_x(LAW), max_iter=50)
    assert value >= RESULT["fits"]["besiroglu"]["objective"] * (1 - 1e-9)
    assert law.alpha == pytest.approx(LAW.alpha, abs=1e-5)
    assert law.beta == pytest.approx(LAW.beta, abs=1e-5)


def test_besiroglu_parameters_lie_in_the_bootstrap_intervals_chinchillas_do_not():
    rows = stamp.bootstrap_rows(RESULT)
    assert rows.shape == (RESULT["config"]["resamples"], 5)
    assert bool(torch.isfinite(rows).all())
    for i, name in enumerate(stamp.LAW_FIELDS):
        lo, hi = stamp.percentile_interval(rows[:, i])
        assert lo <= getattr(BESIROGLU, name) <= hi, name
    for i, name in ((0, "E"), (2, "B"), (4, "beta")):
        lo, hi = stamp.percentile_interval(rows[:, i])
        assert not lo <= getattr(CHINCHILLA, name) <= hi, name


def test_published_chinchilla_parameters_fit_the_runs_worse():
    published = float(objective(law_x(CHINCHILLA), POINTS))
    assert published > 2 * RESULT["fits"]["besiroglu"]["objective"]
