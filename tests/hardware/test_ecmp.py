"""ECMP's balls in bins against hand counts and against hashing flows at random."""

from __future__ import annotations

import itertools

import pytest
from aiinfra.hardware.ecmp import (
    ecmp_efficiency,
    expected_max_load,
    hash_flows,
    loads,
)


def _max_load_by_enumeration(flows: int, links: int) -> float:
    """E[max load] over all links^flows equally likely assignments, counted."""
    total = 0
    for assignment in itertools.product(range(links), repeat=flows):
        total += max(loads(list(assignment), links))
    return total / links**flows


@pytest.mark.parametrize(
    ("flows", "links", "by_hand"),
    [
        (2, 2, 1.5),  # same uplink with probability 1/2
        (3, 2, 2.25),  # all three together 1/4: 3, else 2
        (2, 3, 4 / 3),  # together 1/3
        (1, 5, 1.0),
        (5, 1, 5.0),
    ],
)
def test_expected_max_load_by_hand(flows, links, by_hand):
    assert expected_max_load(flows, links) == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize(("flows", "links"), [(4, 4), (6, 3), (5, 4), (8, 2), (7, 5)])
def test_expected_max_load_counts_every_assignment(flows, links):
    exact = _max_load_by_enumeration(flows, links)
    assert expected_max_load(flows, links) == pytest.approx(exact, rel=1e-9)


def test_expected_max_load_matches_hashing_at_random():
    # 8 flows on 8 uplinks, 20,000 seeded hashes: the sample mean of the busiest
    # uplink is within 4 standard errors of the exact value (about 2.60).
    samples = [max(loads(hash_flows(8, 8, seed), 8)) for seed in range(20_000)]
    mean = sum(samples) / len(samples)
    var = sum((x - mean) ** 2 for x in samples) / (len(samples) - 1)
    assert abs(mean - expected_max_load(8, 8)) < 4 * (var / len(samples)) ** 0.5
    assert 2.5 < expected_max_load(8, 8) < 2.7


def test_more_queue_pairs_raise_what_the_flows_get_toward_one():
    effs = [ecmp_efficiency(8, 8, q) for q in (1, 2, 4, 8, 16)]
    assert effs == sorted(effs) and effs[0] < 0.4 and effs[-1] < 1
    # one flow per uplink, perfectly balanced, only if every flow has its own link
    assert ecmp_efficiency(1, 8) == 1.0
    # as many flows as uplinks: 8 / E[max] of a flow-time, k/n = 1
    assert ecmp_efficiency(8, 8) == pytest.approx(1 / expected_max_load(8, 8))


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: expected_max_load(0, 4), ValueError, "flows"),
        (lambda: expected_max_load(4, 0), ValueError, "links"),
        (lambda: expected_max_load(4.0, 2), TypeError, "flows"),
        (lambda: ecmp_efficiency(8, 8, 0), ValueError, "queue_pairs"),
        (lambda: hash_flows(8, 8, seed=1.5), TypeError, "seed"),
    ],
)
def test_bad_arguments_name_themselves(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_the_book_frames_stack_each_flow_on_its_hashed_uplink():
    from aiinfra.book.hardware import clusters

    uplinks = hash_flows(clusters.ECMP_LINKS, clusters.ECMP_LINKS, clusters.ECMP_SEED)
    frames = clusters.ecmp_frames()
    # the empty uplinks, a flow each, then the hash beside the efficiency curve
    assert len(frames) == clusters.ECMP_LINKS + 2
    last = frames[-1].axes[1].lines[0].get_ydata()
    expected = [ecmp_efficiency(8, 8, q) for q in clusters.ECMP_QUEUE_PAIRS]
    assert list(last) == pytest.approx([100 * e for e in expected])
    for placed, fig in enumerate(frames[:-1] + frames[-1:]):
        placed = min(placed, clusters.ECMP_LINKS)
        bars = fig.axes[0].patches
        assert len(bars) == placed
        heights = [0] * clusters.ECMP_LINKS
        for bar in bars:
            heights[round(bar.get_x() + bar.get_width() / 2)] += bar.get_height()
        assert heights == loads(uplinks[:placed], clusters.ECMP_LINKS)
    assert clusters.ecmp_busiest() == max(loads(uplinks, clusters.ECMP_LINKS))
