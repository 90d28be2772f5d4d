"""Checkpoint intervals and goodput against papers and a failure-by-failure simulation.

The closed-form goodput is checked against :func:`simulate_goodput`, which walks the
gaps between Poisson failures and counts the segments completed in each; Young's and
Daly's intervals against the examples their papers and users published.
"""

import math

import numpy as np
import pytest
from aiinfra.hardware.reliability import (
    LLAMA3_405B,
    LLAMA3_405B_CAUSES,
    Interruptions,
    cluster_mtbf,
    daly_interval,
    goodput,
    interruption_rates,
    simulate_goodput,
    young_interval,
)

HOURS_PER_YEAR = 365 * 24


def test_young_interval_reproduces_the_graphlab_example():
    # Low et al., "Distributed GraphLab", PVLDB 5(8) 2012: 64 machines with
    # a per-machine MTBF of 1 year and a 2-minute checkpoint give an optimal interval
    # of about 3 hours (Young's formula).
    mtbf = cluster_mtbf(1 / HOURS_PER_YEAR, 64)  # hours
    assert young_interval(2 / 60, mtbf) == pytest.approx(3.0, rel=0.02)


@pytest.mark.parametrize(
    ("mtbf_min", "tau_min", "abs_tol"),
    [(24 * 60, 117, 0.5), (6 * 60, 57, 0.5), (15, 9.1, 0.05)],
)
def test_daly_interval_reproduces_daly_2006_figures(mtbf_min, tau_min, abs_tol):
    # Daly 2006, Figs. 3-5: delta = 5 min; the model predicts tau_opt = 117 min at
    # M = 24 h, 57 min at M = 6 h, 9.1 min at M = 15 min (printed to that precision).
    assert daly_interval(5, mtbf_min) == pytest.approx(tau_min, abs=abs_tol)


def test_daly_interval_is_the_mtbf_once_checkpoints_cost_two_mtbfs():
    assert daly_interval(3.0, 1.5) == 1.5
    assert daly_interval(10.0, 1.0) == 1.0


@pytest.mark.parametrize(
    ("tau", "c", "r", "m"),
    [
        (5.0, 1.0, 2.0, 100.0),
        (20.0, 1.0, 2.0, 100.0),
        (60.0, 1.0, 2.0, 100.0),
        (10.0, 3.0, 10.0, 20.0),  # harsh: a failure every two segments
        (0.35, 1 / 60, 10 / 60, 3.09),  # hours: Llama 3's job MTBF, 1-min checkpoint
    ],
)
def test_goodput_matches_monte_carlo(tau, c, r, m):
    # 200,000 failures: the estimate's relative standard deviation over 30 seeds is
    # 0.01-0.24 % at these points, so 1 % is at least four of them.
    simulated = simulate_goodput(tau, c, r, m, 200_000, np.random.default_rng(0))
    assert goodput(tau, c, r, m) == pytest.approx(simulated, rel=0.01)


def test_goodput_without_failures_is_work_over_work_plus_checkpoint():
    assert goodput(30.0, 2.0, 5.0, 1e12) == pytest.approx(30 / 32, rel=1e-6)


def _argmax_goodput(c: float, m: float) -> float:
    taus = np.geomspace(1e-3 * m, m, 20_001)
    return float(taus[np.argmax([goodput(t, c, 0.0, m) for t in taus])])


def test_goodput_peaks_near_young_when_checkpoints_are_cheap():
    c, m = 1.0, 1000.0  # C / M = 1e-3
    assert _argmax_goodput(c, m) == pytest.approx(young_interval(c, m), rel=0.03)


@pytest.mark.parametrize("ratio", [1e-3, 1e-2, 1e-1])
def test_daly_interval_is_closer_to_the_optimum_than_young(ratio):
    best = _argmax_goodput(ratio, 1.0)
    daly, young = daly_interval(ratio, 1.0), young_interval(ratio, 1.0)
    assert daly == pytest.approx(best, rel=0.005)
    assert abs(daly - best) < abs(young - best)


def test_cluster_mtbf_is_the_mean_of_the_first_of_n_failures():
    rate, gpus = 0.01, 64  # failures per GPU-hour
    first = np.random.default_rng(1).exponential(1 / rate, size=(20_000, gpus))
    assert cluster_mtbf(rate, gpus) == pytest.approx(first.min(axis=1).mean(), rel=0.03)


def test_llama3_interruptions_match_the_paper():
    # Dubey et al. 2024, Sec. 3.3.4: 466 interruptions in 54 days on 16,384 H100s,
    # 47 planned and 419 unexpected: about one unexpected interruption every 3 hours.
    assert LLAMA3_405B.interruptions - LLAMA3_405B.unexpected == 47
    rates = interruption_rates()
    assert rates.per_day == pytest.approx(8.63, abs=0.005)
    assert rates.unexpected_per_day == pytest.approx(7.76, abs=0.005)
    assert rates.job_mtbf_hours == pytest.approx(3.0, rel=0.05)
    gpu_rate = 1 / rates.gpu_mtbf_hours
    assert cluster_mtbf(gpu_rate, 16_384) == pytest.approx(rates.job_mtbf_hours)


def test_llama3_causes_add_up_to_the_unexpected_interruptions():
    # Dubey et al. 2024, Table 5 and Sec. 3.3.4: the rows count the 419 unexpected
    # interruptions; "GPU issues are the largest category, accounting for 58.7 %".
    assert sum(n for *_, n, _ in LLAMA3_405B_CAUSES) == LLAMA3_405B.unexpected
    gpu = sum(pct for _, cat, _, pct in LLAMA3_405B_CAUSES if cat == "GPU")
    assert gpu == pytest.approx(58.7, abs=1e-9)
    assert len({c for c, *_ in LLAMA3_405B_CAUSES}) == len(LLAMA3_405B_CAUSES)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: young_interval(-1.0, 10.0), "checkpoint_cost"),
        (lambda: young_interval(1.0, 0.0), "mtbf"),
        (lambda: daly_interval(0.0, 10.0), "checkpoint_cost"),
        (lambda: daly_interval(1.0, -5.0), "mtbf"),
        (lambda: goodput(0.0, 1.0, 1.0, 10.0), "interval"),
        (lambda: goodput(-2.0, 1.0, 1.0, 10.0), "interval"),
        (lambda: goodput(1.0, -1.0, 1.0, 10.0), "checkpoint_cost"),
        (lambda: goodput(1.0, 1.0, -1.0, 10.0), "restart_cost"),
        (lambda: goodput(1.0, 1.0, 1.0, 0.0), "mtbf"),
        (lambda: goodput(1.0, 1.0, 1.0, math.inf), "mtbf"),
        (
            lambda: simulate_goodput(1.0, 1.0, 1.0, 0.0, 10, np.random.default_rng()),
            "mtbf",
        ),
        (
            lambda: simulate_goodput(1.0, 1.0, 1.0, 9.0, 0, np.random.default_rng()),
            "failures",
        ),
        (lambda: cluster_mtbf(0.0, 8), "gpu_failure_rate"),
        (lambda: cluster_mtbf(1e-4, 0), "gpus"),
        (lambda: interruption_rates(Interruptions("x", 5, 6, 1.0, 8)), "unexpected"),
        (lambda: interruption_rates(Interruptions("x", 5, 4, 0.0, 8)), "days"),
        (lambda: interruption_rates(Interruptions("x", 5, 4, 1.0, 0)), "gpus"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_non_number_raises_type_error():
    with pytest.raises(TypeError, match="mtbf"):
        young_interval(1.0, "10")
