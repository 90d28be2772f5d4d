"""ZeRO-3's simulated timeline against hand-worked schedules and Llama 3's config.

Ground truth: two units traced by hand on the rules of ``Zero3`` (one collective at
a time on the communication stream, compute waiting for its all-gather), and the
parameters of a Llama 3 8B layer counted from its published configuration
(hidden size 4096, 32 query and 8 key/value heads of 128, MLP width 14336).
"""

import pytest
from aiinfra.parallel.data.figures import Span
from aiinfra.parallel.zero.timeline import (
    UnitCosts,
    draw_timeline,
    forward_overlap_tokens,
    layer_costs,
    layer_parameters,
    simulate_zero3,
    timeline_figure,
)
from matplotlib.figure import Figure

# Two units: forward 1, backward 2, all-gather 3, reduce-scatter 1 (time units).
COSTS = UnitCosts([1, 1], [2, 2], [3, 3], [1, 1])


def _spans(spans):
    return [(s.index, s.start, s.end) for s in spans]


def test_synchronous_step_is_the_sum_of_compute_and_communication():
    t = simulate_zero3(COSTS)
    # AG0 C0 AG1 C1 | AG1 B1 RS1 AG0 B0 RS0, one after the other.
    assert _spans(t.gathers) == [(0, 0, 3), (1, 4, 7), (1, 8, 11), (0, 14, 17)]
    assert _spans(t.compute) == [(0, 3, 4), (1, 7, 8), (1, 11, 13), (0, 17, 19)]
    assert _spans(t.reduces) == [(1, 13, 14), (0, 19, 20)]
    assert (t.step, t.compute_time, t.exposed) == (20, 6, 14)


def test_prefetch_starts_the_next_gather_while_this_unit_computes():
    t = simulate_zero3(COSTS, prefetch=1)
    # AG1 starts as unit 0 computes; in backward AG0 runs behind B1, and RS1 waits
    # for the link that AG0 holds until 13.
    assert _spans(t.gathers) == [(0, 0, 3), (1, 3, 6), (1, 7, 10), (0, 10, 13)]
    assert _spans(t.compute) == [(0, 3, 4), (1, 6, 7), (1, 10, 12), (0, 13, 15)]
    assert _spans(t.reduces) == [(1, 13, 14), (0, 15, 16)]
    assert (t.step, t.exposed) == (16, 10)


def test_no_reshard_after_forward_skips_the_backward_gathers():
    t = simulate_zero3(COSTS, prefetch=1, reshard_after_forward=False)
    assert _spans(t.gathers) == [(0, 0, 3), (1, 3, 6)]
    assert _spans(t.compute) == [(0, 3, 4), (1, 6, 7), (1, 7, 9), (0, 9, 11)]
    assert _spans(t.reduces) == [(1, 9, 10), (0, 11, 12)]
    assert (t.step, t.exposed) == (12, 6)


def test_llama_3_8b_layer_parameters_match_its_configuration():
    d, kv, ff = 4096, 8 * 128, 14336
    attention = 2 * d * d + 2 * d * kv  # W_q, W_o; W_k, W_v
    assert layer_parameters("llama-3-8b") == attention + 3 * d * ff + 2 * d


def test_layer_costs_and_the_figure_order_the_variants():
    costs = layer_costs()
    assert len(costs.forward) == 32
    assert costs.backward[0] == pytest.approx(2 * costs.forward[0])
    steps = [simulate_zero3(costs, p, r).step for p, r in ((0, True), (1, True))]
    assert steps[0] > steps[1] > simulate_zero3(costs, 1, False).step
    assert isinstance(timeline_figure(costs), Figure)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: simulate_zero3(COSTS, prefetch=-1), "prefetch must be an int"),
        (lambda: simulate_zero3(UnitCosts([1], [], [1], [1])), "four lists"),
        (lambda: simulate_zero3(UnitCosts([-1], [1], [1], [1])), "must be >= 0"),
        (lambda: layer_costs(tokens=0), "tokens must be an int >= 1"),
        (lambda: layer_costs(n_ranks=1), "n_ranks must be an int >= 2"),
        (lambda: layer_costs(link="pcie"), "link must be one of"),
        (lambda: layer_costs(gpu="V100"), "gpu must be one of"),
        (lambda: forward_overlap_tokens(n_ranks=1), "n_ranks must be an int >= 2"),
        (lambda: forward_overlap_tokens(link="x"), "link must be one of"),
        (
            lambda: draw_timeline(
                Figure().add_subplot(), "x", simulate_zero3(COSTS), fs=0
            ),
            "fs must be > 0",
        ),
    ],
)
def test_timeline_functions_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_forward_overlap_tokens_is_peak_flops_over_nic_bytes_per_second():
    # H100 SXM datasheet: 989 TFLOP/s dense bf16; a 400 Gb/s NIC: 50 GB/s a way.
    assert forward_overlap_tokens(64, "nic400") == pytest.approx(
        63 / 64 * 989e12 / 50e9
    )
    # At T*, a layer's forward time equals its all-gather's bandwidth term (the
    # simulated gather minus the ring's 63 latencies of 5 us).
    t_star = forward_overlap_tokens(64, "nic400")
    costs = layer_costs(tokens=round(t_star), n_ranks=64, link="nic400")
    bandwidth_term = costs.gather[0] - 63 * 5e-6
    assert costs.forward[0] == pytest.approx(bandwidth_term, rel=1e-4)


def test_book_values_reject_unknown_names():
    from aiinfra.book.training import zero_practice

    with pytest.raises(ValueError, match="kind must be one of"):
        zero_practice.zero3_unit_ms("backprop")
    for f in (zero_practice.zero3_step_ms, zero_practice.zero3_exposed_ms):
        with pytest.raises(ValueError, match="variant must be one of"):
            f("async")
    exposed = [zero_practice.zero3_exposed_ms(v) for v in ("sync", "prefetch", "keep")]
    assert exposed == sorted(exposed, reverse=True) and exposed[-1] > 0


def test_spans_are_the_ddp_timeline_spans():
    assert simulate_zero3(COSTS).compute[0] == Span(0, 3, 4)
