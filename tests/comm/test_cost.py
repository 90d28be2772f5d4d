"""The alpha-beta-gamma cost model against Thakur, Rabenseifner & Gropp (2005).

Ground truth: the formulas of Thakur, Rabenseifner & Gropp, "Optimization of
Collective Communication Operations in MPICH", IJHPCA 19(1), 2005, evaluated
here by hand at chosen points and, independently of the code, from the formula text
at powers of two.
"""

import functools
import math

import pytest
from aiinfra.comm import cost

# A round link for hand arithmetic: alpha = 10 us, beta = 1 ns/B (1 GB/s),
# gamma = 0.1 ns/B; n = 1 MB (10^6 bytes) so n beta = 1000 us, n gamma = 100 us.
LINK = cost.LinkModel(alpha=10e-6, beta=1e-9, gamma=1e-10)
N = 1e6


@pytest.mark.parametrize(
    ("fn", "p", "expected_us"),
    [
        # ring: 2(p-1) a + 2((p-1)/p) n b + ((p-1)/p) n g = 60 + 1500 + 75
        (cost.ring_all_reduce_time, 4, 1635.0),
        # p = 6: 100 + 2 (5/6) 1000 + (5/6) 100
        (cost.ring_all_reduce_time, 6, 100 + 5000 / 3 + 250 / 3),
        # recursive doubling: lg p (a + n b + n g) = 2 (10 + 1000 + 100)
        (cost.recursive_doubling_all_reduce_time, 4, 2220.0),
        # p = 6 folds onto 4: (2a + 2nb + ng) = 2120, then 2 (1110)
        (cost.recursive_doubling_all_reduce_time, 6, 2120.0 + 2220.0),
        # Rabenseifner: 2 lg p a + 2((p-1)/p) n b + ((p-1)/p) n g = 40 + 1500 + 75
        (cost.rabenseifner_all_reduce_time, 4, 1615.0),
        (cost.rabenseifner_all_reduce_time, 6, 2120.0 + 1615.0),
        # ring reduce-scatter: (p-1) a + ((p-1)/p) n (b + g) = 30 + 825
        (cost.ring_reduce_scatter_time, 4, 855.0),
        # ring all-gather: (p-1) a + ((p-1)/p) n b = 30 + 750
        (cost.ring_all_gather_time, 4, 780.0),
        # binomial broadcast: ceil(lg p)(a + n b): 2 rounds at p = 4, 3 at p = 5
        (cost.binomial_broadcast_time, 4, 2020.0),
        (cost.binomial_broadcast_time, 5, 3030.0),
        (cost.binomial_reduce_time, 5, 3330.0),
        # pairwise all-to-all: (p-1)(a + (n/p) b) = 3 (10 + 250)
        (cost.pairwise_all_to_all_time, 4, 780.0),
    ],
)
def test_cost_matches_thakur_formula_at_hand_computed_points(fn, p, expected_us):
    assert fn(N, p, LINK) * 1e6 == pytest.approx(expected_us, rel=1e-12)


def test_hierarchical_all_reduce_is_the_sum_of_its_three_ring_phases():
    # p = 8 as 2 nodes x 4: reduce-scatter(4) 855 + ring all-reduce of n/4 on 2
    # ranks (20 + 250 + 12.5) + all-gather(4) 780, all on LINK.
    t = cost.hierarchical_all_reduce_time(N, 8, LINK, local_size=4, local_link=LINK)
    assert t * 1e6 == pytest.approx(855 + 282.5 + 780, rel=1e-12)


@pytest.mark.parametrize("p", [2, 4, 8, 16, 64, 1024])
@pytest.mark.parametrize("n", [0.0, 1.0, 4096.0, 1e9])
def test_cost_matches_facts_formulas_at_powers_of_two(p, n):
    a, b, g, lg = LINK.alpha, LINK.beta, LINK.gamma, math.log2(p)
    facts = {  # Thakur et al. 2005, written out independently
        cost.ring_all_reduce_time: 2 * (p - 1) * a
        + 2 * ((p - 1) / p) * n * b
        + ((p - 1) / p) * n * g,
        cost.recursive_doubling_all_reduce_time: lg * (a + n * b + n * g),
        cost.rabenseifner_all_reduce_time: 2 * lg * a
        + 2 * ((p - 1) / p) * n * b
        + ((p - 1) / p) * n * g,
        cost.ring_all_gather_time: (p - 1) * a + ((p - 1) / p) * n * b,
    }
    for fn, expected in facts.items():
        assert fn(n, p, LINK) == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_one_rank_costs_nothing():
    for fn in cost.ALGORITHMS.values():
        assert fn(N, 1, LINK) == 0.0


@pytest.mark.parametrize("p", [4, 8, 16, 64, 256])
@pytest.mark.parametrize("link", ["nvlink", "ib400", "ib100", LINK])
def test_crossover_costs_are_equal_and_the_order_flips_across_it(p, link):
    a, b = "recursive_doubling_all_reduce", "ring_all_reduce"
    n = cost.crossover_size(a, b, p, link)
    assert n is not None and n > 0
    ta, tb = cost.ALGORITHMS[a], cost.ALGORITHMS[b]
    assert ta(n, p, link) == pytest.approx(tb(n, p, link), rel=1e-9)
    assert ta(0.9 * n, p, link) < tb(0.9 * n, p, link)  # doubling wins below
    assert ta(1.1 * n, p, link) > tb(1.1 * n, p, link)  # the ring wins above


def test_crossover_is_none_when_the_costs_never_cross():
    # p = 2, gamma = 0: recursive doubling (a + n b) beats the ring (2a + n b) always.
    no_gamma = cost.LinkModel(alpha=1e-6, beta=1e-9)
    assert (
        cost.crossover_size(
            "recursive_doubling_all_reduce", "ring_all_reduce", 2, no_gamma
        )
        is None
    )


def test_crossover_bisection_agrees_with_the_closed_form():
    # Callables take the bisection path; wrapping named costs must not move the answer.
    a, b = cost.recursive_doubling_all_reduce_time, cost.rabenseifner_all_reduce_time
    closed = cost.crossover_size(
        "recursive_doubling_all_reduce", "rabenseifner_all_reduce", 16, "ib400"
    )
    bisected = cost.crossover_size(lambda *x: a(*x), lambda *x: b(*x), 16, "ib400")
    assert bisected == pytest.approx(closed, rel=1e-9)
    hier = functools.partial(cost.hierarchical_all_reduce_time, local_size=8)
    n = cost.crossover_size("recursive_doubling_all_reduce", hier, 16, "ib400")
    assert a(n, 16, "ib400") == pytest.approx(hier(n, 16, "ib400"), rel=1e-9)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: cost.ring_all_reduce_time(N, 0, LINK), "p must be an int >= 1"),
        (lambda: cost.ring_all_reduce_time(-1.0, 4, LINK), "n must be a finite"),
        (lambda: cost.ring_all_reduce_time(N, 4, "wifi"), "link must be one of"),
        (lambda: cost.LinkModel(alpha=-1.0, beta=0.0), "alpha must be a finite"),
        (lambda: cost.LinkModel(alpha=0.0, beta=math.inf), "beta must be a finite"),
        (lambda: cost.crossover_size("ring", "ring_all_reduce", 4, LINK), "alg_a"),
        (
            lambda: cost.hierarchical_all_reduce_time(N, 6, LINK, local_size=4),
            r"local_size \(4\) must divide p \(6\)",
        ),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_cost_formula_table_reads_coefficients_off_the_code():
    table = cost.cost_formula_table(p=8, n=16 * 2**20, link="nvlink")
    rows = {row[0]: row for row in table.rows}
    assert set(rows) == set(cost.ALGORITHMS)
    assert rows["ring_all_reduce"][1:3] == ["14 alpha", "1.75 n beta + 0.875 n gamma"]
    assert rows["recursive_doubling_all_reduce"][1] == "3 alpha"
    # nvlink: alpha = 1 us, beta = 5 ps/B, gamma = 1 ps/B; n = 16 MiB = 16,777,216 B:
    # 14 alpha = 14 us; (1.75 x 5 + 0.875 x 1) ps/B x n = 161.480704 us.
    latency, bandwidth, total = rows["ring_all_reduce"][3:]
    assert latency == pytest.approx(14.0)
    assert bandwidth == pytest.approx(161.480704)
    assert total == pytest.approx(175.480704)


def test_crossover_table_shows_the_hand_solved_crossovers():
    # ib100: alpha = 5 us, beta = 1 / 12.5 GB/s = 80 ps/B, gamma = 1 ps/B.
    # p = 2: doubling a + nb + ng = ring (and Rabenseifner) 2a + nb + ng/2
    #   -> n = 2a / g = 10^7 B = 9.54 MiB.
    # p = 8: 3(a + nb + ng) = ring 14a + 1.75nb + 0.875ng -> n = 11a / (1.25b +
    #   2.125g) = 538,556 B = 526 KiB; = Rabenseifner 6a + 1.75nb + 0.875ng
    #   -> n = 3a / (1.25b + 2.125g) = 146,879 B = 143 KiB.
    table = cost.crossover_table(ps=(2, 8), link="ib100")
    assert table.rows == [[2, "9.54 MiB", "9.54 MiB"], [8, "526 KiB", "143 KiB"]]
