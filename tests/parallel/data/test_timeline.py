"""The simulated data-parallel step against hand-computed timelines and torch's DDP.

Ground truths: small cases worked out by hand on round numbers (one tensor and one
bucket: nothing overlaps; infinite bandwidth and no latency: nothing exposed; comm
slower than compute: the exposed time is the all-reduce total minus the overlap
counted on paper), torch's own bucket assignment
(``torch.distributed._compute_bucket_assignment_by_size``, the function DDP's
reducer calls), and orderings that any correct simulator keeps (more bandwidth or
more tokens never expose more; more latency never exposes less).
"""

import math

import pytest
import torch
import torch.distributed as dist
from aiinfra.parallel.data.overlap import Link
from aiinfra.parallel.data.timeline import (
    Gradient,
    assign_dp_buckets,
    exposed_vs_bucket,
    model_gradients,
    simulate_dp_step,
)
from aiinfra.parallel.data.timeline_figures import bucket_sweep_figure, timeline_figure
from torch import nn

# F = 4000 FLOP/s: a tensor of 1000 weights backs up one token in exactly 1 s.
UNIT = Link("unit", flops=4000.0, bandwidth=1000.0, alpha=0.0)


def _non_increasing(xs: list[float]) -> bool:
    return all(b <= a + 1e-9 for a, b in zip(xs, xs[1:], strict=False))


def _weights(*numels: int) -> list[Gradient]:
    return [Gradient(f"w{i}", k, 4.0 * k) for i, k in enumerate(numels)]


def test_one_tensor_in_one_bucket_overlaps_nothing():
    # Backward 1 s (4000 FLOPs at 4000 FLOP/s); forward half of it.
    # Ring on 2 ranks, 2000 bytes: 2 (p-1) alpha + 2 (p-1)/p n beta = 1 + 2 = 3 s.
    link = Link("t", flops=4000.0, bandwidth=1000.0, alpha=0.5)
    step = simulate_dp_step(_weights(1000), 1, link, 2, 10**6, mfu=1.0)
    assert step.backward_end == pytest.approx(1.0)
    assert step.all_reduce[0].start == pytest.approx(1.0)
    assert step.exposed == pytest.approx(3.0)
    assert step.step == pytest.approx(0.5 + 1.0 + 3.0)


def test_infinite_bandwidth_and_no_latency_expose_nothing():
    link = Link("ideal", flops=4000.0, bandwidth=math.inf, alpha=0.0)
    step = simulate_dp_step(_weights(1000, 500, 2000), 3, link, 8, 1, mfu=0.5)
    assert step.exposed == 0.0 and step.communication == 0.0
    assert step.backward_end == pytest.approx(4 * 3500 * 3 / (0.5 * 4000))  # 21 s


def test_comm_slower_than_compute_exposes_the_sum_minus_the_overlap():
    # Three tensors of 1000 weights, one bucket each (cap 1 byte): backward ends
    # them at 1, 2, 3 s. Each all-reduce of 2000 bytes on 2 ranks at 1000 B/s takes
    # 2 s: [1, 3], [3, 5], [5, 7]. Communication 6 s, of which [1, 3] overlaps
    # backward: 2 s. Exposed: 6 - 2 = 4 s, from 3 s to 7 s.
    step = simulate_dp_step(_weights(1000, 1000, 1000), 1, UNIT, 2, 1, mfu=1.0)
    assert [(s.start, s.end) for s in step.all_reduce] == [(1, 3), (3, 5), (5, 7)]
    assert step.communication == pytest.approx(6.0)
    assert step.exposed == pytest.approx(6.0 - 2.0)


def test_a_bucket_waits_for_its_last_gradient_not_its_first():
    # Tensors of 1000, 3000 weights in one bucket: ready at 1 s and 4 s.
    step = simulate_dp_step(_weights(1000, 3000), 1, UNIT, 2, 10**6, mfu=1.0)
    assert step.buckets == [[0, 1]]
    assert step.all_reduce[0].start == pytest.approx(4.0)
    assert step.exposed == pytest.approx(8000 / 1000)  # 2 x 1/2 x 8000 bytes


@pytest.mark.parametrize(
    ("numels", "caps"),
    [
        ((300, 100, 600, 50, 50), (1000, 600)),
        ((10, 20, 30, 40, 50, 60, 70), (40, 100)),
        ((500, 1, 1, 500, 2000, 3), (1, 5000)),
    ],
)
def test_buckets_equal_the_ones_ddps_reducer_computes(numels, caps):
    tensors = [torch.empty(k, dtype=torch.bfloat16) for k in numels]
    expected, _ = dist._compute_bucket_assignment_by_size(
        tensors, list(caps), [False] * len(numels), list(range(len(numels)))
    )
    assert assign_dp_buckets(list(numels), 2, caps[1], caps[0]) == expected


def test_model_gradients_cost_weights_only_in_backward_order():
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    grads = model_gradients(model)
    assert [g.name for g in grads] == ["2.bias", "2.weight", "1.bias", "1.weight"] + [
        "0.bias",
        "0.weight",
    ]
    assert [g.flops for g in grads] == [0, 4 * 8, 0, 0, 0, 4 * 12]


def test_more_bandwidth_or_tokens_never_expose_more_and_latency_never_less():
    grads = _weights(700, 300, 900, 100, 400, 800)
    exposed = [
        simulate_dp_step(grads, 2, Link("b", 4000.0, w, 0.01), 4, 1500).exposed
        for w in (200.0, 400.0, 800.0, 1600.0, 6400.0)
    ]
    assert _non_increasing(exposed) and exposed[0] > exposed[-1]
    by_tokens = [simulate_dp_step(grads, t, UNIT, 4, 1500).exposed for t in (1, 2, 8)]
    assert _non_increasing(by_tokens) and by_tokens[0] > by_tokens[-1]
    by_alpha = [
        simulate_dp_step(grads, 2, Link("a", 4000.0, 1000.0, a), 4, 1500).exposed
        for a in (0.0, 0.01, 0.1)
    ]
    assert _non_increasing(by_alpha[::-1]) and by_alpha[0] < by_alpha[-1]


def test_exposed_is_at_least_the_last_bucket_and_the_excess_over_backward():
    grads = _weights(700, 300, 900, 100, 400, 800)
    for cap in (1, 1000, 3000, 10**6):
        step = simulate_dp_step(grads, 1, Link("l", 4000.0, 500.0, 0.05), 4, cap)
        last = step.all_reduce[-1]
        assert step.exposed >= last.end - last.start - 1e-12
        assert step.exposed >= step.communication - step.backward_end - 1e-12


def test_the_sweep_matches_one_simulation_per_cap():
    grads = _weights(700, 300, 900)
    caps = [1, 2000, 10**6]
    one_by_one = [simulate_dp_step(grads, 1, UNIT, 2, c).exposed for c in caps]
    assert exposed_vs_bucket(grads, 1, UNIT, 2, caps) == one_by_one


def test_figures_show_each_setting_and_each_curve():
    steps = [("a", simulate_dp_step(_weights(1000, 1000), 1, UNIT, 2, 1))]
    steps.append(("b", simulate_dp_step(_weights(1000, 1000), 1, UNIT, 2, 10**6)))
    (ax,) = timeline_figure(steps).axes
    texts = sorted(t.get_text().strip() for t in ax.texts)
    assert texts == sorted(f"{s.exposed * 1e3:.2f} ms" for _, s in steps)
    assert len(ax.patches) == 2 * 2 + 2 + 1  # backward boxes, then the buckets
    curves = [("x", [1, 2], [0.1, 0.2], 1.5), ("y", [1, 2], [0.3, 0.1], 1.0)]
    (ax,) = bucket_sweep_figure(curves, 2).axes
    assert [list(line.get_ydata()) for line in ax.get_lines()[::2]][:2] == [
        [100.0, 200.0],
        [300.0, 100.0],
    ]


def test_bad_input_is_rejected():
    grads = _weights(1000)
    with pytest.raises(ValueError, match="tokens must be an int >= 1"):
        simulate_dp_step(grads, 0, UNIT, 2, 100)
    with pytest.raises(ValueError, match="n_ranks must be an int >= 2"):
        simulate_dp_step(grads, 1, UNIT, 1, 100)
    with pytest.raises(ValueError, match=r"mfu must be a finite number in \(0, 1\]"):
        simulate_dp_step(grads, 1, UNIT, 2, 100, mfu=1.5)
    with pytest.raises(ValueError, match="link.bandwidth"):
        simulate_dp_step(grads, 1, Link("x", 1.0, 0.0, 0.0), 2, 100)
    with pytest.raises(ValueError, match="bucket_bytes"):
        simulate_dp_step(grads, 1, UNIT, 2, 0)
    with pytest.raises(ValueError, match="first_bucket_bytes"):
        assign_dp_buckets([10], 2, 100, -1)
    with pytest.raises(ValueError, match="numels must be a non-empty list"):
        assign_dp_buckets([], 2, 100, 100)
    with pytest.raises(ValueError, match="caps must hold"):
        exposed_vs_bucket(grads, 1, UNIT, 2, [])
    with pytest.raises(ValueError, match="model must have a trainable parameter"):
        model_gradients(nn.ReLU())
    with pytest.raises(ValueError, match="timelines must hold"):
        timeline_figure([])
    with pytest.raises(ValueError, match="one time per cap"):
        bucket_sweep_figure([("x", [1, 2], [0.1], 1.0)], 2)
