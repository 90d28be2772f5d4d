"""The scaling-law fitter: synthetic laws recovered, the published fit reproduced."""

import math

import pytest
import torch
from aiinfra.scaling.data import ScalingPoints, besiroglu_subset, chinchilla_points
from aiinfra.scaling.fit import (
    bootstrap,
    fit_law,
    grid_starts,
    huber,
    log_predicted_loss,
    objective,
)
from aiinfra.scaling.laws import ChinchillaLaw
from aiinfra.scaling.lbfgs import lbfgs

TRUE = ChinchillaLaw(E=1.8, A=450.0, B=1800.0, alpha=0.34, beta=0.36)
SMALL_GRID = {
    "a": (5.0, 15.0),
    "b": (5.0, 15.0),
    "e": (0.5,),
    "alpha": (0.5,),
    "beta": (0.5,),
}


def synthetic_points(noise, seed=0):
    """Runs on a grid of N and C with losses from TRUE times exp(noise * z)."""
    n = torch.logspace(7.5, 10.5, 8, dtype=torch.float64)
    c = torch.logspace(18, 22, 6, dtype=torch.float64)
    nn, cc = torch.meshgrid(n, c, indexing="ij")
    nn, cc = nn.flatten(), cc.flatten()
    d = cc / (6 * nn)
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(nn.shape, generator=g, dtype=torch.float64)
    return ScalingPoints(nn, d, TRUE.loss(nn, d) * torch.exp(noise * z))


def test_huber_equals_torch_huber_loss():
    r = torch.linspace(-3e-3, 3e-3, 101, dtype=torch.float64)
    expected = torch.nn.functional.huber_loss(
        r, torch.zeros_like(r), reduction="none", delta=1e-3
    )
    assert torch.allclose(huber(r), expected, rtol=1e-12, atol=0)


def test_log_sum_exp_prediction_equals_the_law():
    pts = synthetic_points(noise=0.0)
    x = torch.tensor(
        [[math.log(TRUE.A), math.log(TRUE.B), math.log(TRUE.E), 0.34, 0.36]],
        dtype=torch.float64,
    )
    got = log_predicted_loss(x, pts.n.log(), pts.d.log())[0].exp()
    direct = 1.8 + 450.0 / pts.n**0.34 + 1800.0 / pts.d**0.36
    assert torch.allclose(got, direct, rtol=1e-12, atol=0)


def test_lbfgs_finds_the_rosenbrock_minimum_from_each_start():
    def rosenbrock(x, rows):
        return (1 - x[:, 0]) ** 2 + 100 * (x[:, 1] - x[:, 0] ** 2) ** 2

    starts = torch.tensor([[-1.2, 1.0], [2.0, -1.0], [0.0, 0.0]], dtype=torch.float64)
    x, fx = lbfgs(rosenbrock, starts, max_iter=500, tol=1e-14)
    assert torch.allclose(x, torch.ones_like(x), rtol=0, atol=1e-5)
    assert float(fx.max()) < 1e-10


def test_fitter_recovers_the_law_from_noise_free_points():
    law, value = fit_law(synthetic_points(noise=0.0), grid_starts(SMALL_GRID))
    assert value < 1e-12
    for name in ("E", "A", "B", "alpha", "beta"):
        assert getattr(law, name) == pytest.approx(getattr(TRUE, name), rel=1e-3)


def test_fitter_recovers_the_law_from_noisy_points():
    law, _ = fit_law(synthetic_points(noise=0.003), grid_starts(SMALL_GRID))
    assert law.E == pytest.approx(TRUE.E, rel=0.02)
    assert law.alpha == pytest.approx(TRUE.alpha, abs=0.02)
    assert law.beta == pytest.approx(TRUE.beta, abs=0.02)
    # A and B trade off against the exponents; what matters, the optimum, holds.
    n, _ = law.compute_optimal(1e24)
    n_true, _ = TRUE.compute_optimal(1e24)
    assert n == pytest.approx(n_true, rel=0.15)


def test_fit_to_published_runs_reproduces_besiroglu_notebook():
    # Besiroglu et al.'s notebook (epoch-research/analyzing-chinchilla, commit
    # 9225883, "Replicate exactly"): scipy's L-BFGS-B over the paper's grid on the
    # 240 runs ends at a = 6.16927953, b = 7.67036499, e = 0.59731639,
    # alpha = 0.34731266, beta = 0.36718262, Huber sum 0.0010182740346. Their best
    # start was (10, 20, -0.5, 1.0, 0.0); we start there too.
    points = besiroglu_subset(chinchilla_points())
    start = torch.tensor([[10.0, 20.0, -0.5, 1.0, 0.0]], dtype=torch.float64)
    law, value = fit_law(points, start)
    assert len(points) == 240
    assert value <= 0.0010182740346 * (1 + 1e-9)
    assert law.alpha == pytest.approx(0.34731266, abs=2e-4)
    assert law.beta == pytest.approx(0.36718262, abs=2e-4)
    assert law.E == pytest.approx(math.exp(0.59731639), abs=2e-4)
    assert law.A == pytest.approx(math.exp(6.16927953), rel=0.01)
    assert law.B == pytest.approx(math.exp(7.67036499), rel=0.01)


def test_bootstrap_spreads_around_the_fit_and_repeats_with_its_generator():
    pts = synthetic_points(noise=0.003)
    law = TRUE  # every refit starts here
    first = bootstrap(pts, law, 8, torch.Generator().manual_seed(1), max_iter=50)
    again = bootstrap(pts, law, 8, torch.Generator().manual_seed(1), max_iter=50)
    assert torch.equal(first, again)
    assert first.shape == (8, 5)
    assert float(first[:, 3].std()) > 0  # the resamples differ
    assert abs(float(first[:, 3].mean()) - law.alpha) < 0.02


def test_objective_weights_count_runs():
    pts = synthetic_points(noise=0.003)
    x = torch.tensor([[6.0, 7.0, 0.6, 0.35, 0.35]], dtype=torch.float64)
    twice = torch.full((1, len(pts)), 2.0, dtype=torch.float64)
    assert float(objective(x, pts, twice)) == pytest.approx(
        2 * float(objective(x, pts))
    )


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda o: ScalingPoints(-o, o, o), "n must be finite and > 0"),
        (lambda o: ScalingPoints(o, o * 0, o), "d must be finite and > 0"),
        (lambda o: ScalingPoints(o, o, -o), "loss must be finite and > 0"),
        (lambda o: ScalingPoints(o, o[:-1], o), "one length"),
        (lambda o: ScalingPoints(o[:4], o[:4], o[:4]), "at least 5 points"),
        (lambda o: ScalingPoints([1.0] * 6, o, o), "n must be a torch.Tensor"),
        (
            lambda o: fit_law(synthetic_points(0.0), o[:, None]),
            r"starts must be \(S, 5\)",
        ),
        (
            lambda o: bootstrap(synthetic_points(0.0), TRUE, 1, None),
            "resamples must be",
        ),
        (lambda o: grid_starts({"a": (1.0,)}), "grid must give values"),
    ],
)
def test_bad_input_is_rejected(make, match):
    ones = torch.ones(6, dtype=torch.float64)
    with pytest.raises((ValueError, TypeError), match=match):
        make(ones)
