"""Tests of the request trace, the step-cost model and the batching simulator.

Ground truths: schedules of three requests worked by hand for each policy, FLOPs
counted by ``FlopCounterMode`` on the package's Transformer, the Pollaczek-Khinchine
mean time in an M/D/1 queue, and token conservation.
"""

import numpy as np
import pytest
import torch
from aiinfra.accelerators import GPUS, Gpu
from aiinfra.infer.batching.simulator import simulate_continuous, simulate_static
from aiinfra.infer.step_cost import LinearStepCost, RooflineStepCost
from aiinfra.infer.trace import Record, Request, latency_summary, poisson_trace
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import preset
from aiinfra.models.transformer import Transformer
from torch.utils.flop_counter import FlopCounterMode

# A: 4-token prompt, 3 tokens out; C: 2 and 2; B arrives at 0.5 with 2 and 1.
HAND = [Request(0, 0.0, 4, 3), Request(1, 0.0, 2, 2), Request(2, 0.5, 2, 1)]
UNIT = LinearStepCost(fixed=1.0)  # every step takes one second


def times(result) -> list[tuple[float, float, float, float]]:
    return [(r.admitted, r.first_token, r.finish, r.released) for r in result.records]


def test_static_batching_hand_schedule() -> None:
    # {A, C}: prefill [0, 1), decodes [1, 2) and [2, 3) (C done at 2, padded to 3);
    # B waits for the batch and runs alone in [3, 4).
    result = simulate_static(HAND, UNIT, max_batch=2, kv_capacity=100)
    assert times(result) == [(0, 1, 3, 3), (0, 1, 2, 3), (3, 4, 4, 4)]
    assert [r.token_times for r in result.records] == [(1, 2, 3), (1, 2), (4,)]
    assert result.steps == 4


def test_continuous_batching_hand_schedule() -> None:
    # C leaves at 2, so B joins the step [2, 3) next to A's last decode.
    result = simulate_continuous(HAND, UNIT, max_batch=2, kv_capacity=100)
    assert times(result) == [(0, 1, 3, 3), (0, 1, 2, 2), (2, 3, 3, 3)]
    assert [r.token_times for r in result.records] == [(1, 2, 3), (1, 2), (3,)]
    assert result.steps == 3


def test_chunked_prefill_hand_schedule() -> None:
    # Budget 3: [0, 1) A's first 3 prompt tokens; [1, 2) A's last one and C's two;
    # [2, 3) two decodes; [3, 4) A's last decode and B's prompt (2 <= 3 - 1).
    result = simulate_continuous(HAND, UNIT, 2, 100, token_budget=3)
    assert times(result) == [(0, 2, 4, 4), (0, 2, 3, 3), (3, 4, 4, 4)]
    assert result.steps == 4


def test_chunked_prefill_serves_decodes_first() -> None:
    # Budget 2: while A decodes, B's 4-token prompt gets 1 token per step, in
    # [1, 2) ... [4, 5); its first token comes at 5, A's last one at 4.
    trace = [Request(0, 0.0, 1, 4), Request(1, 0.5, 4, 1)]
    result = simulate_continuous(trace, UNIT, 2, 100, token_budget=2)
    assert times(result) == [(0, 1, 4, 4), (1, 5, 5, 5)]
    assert result.records[0].token_times == (1, 2, 3, 4)  # one per step


def test_per_token_cost_shows_static_padding() -> None:
    per_token = LinearStepCost(fixed=0.0, per_token=1.0)
    # Static pads C's prompt to 4: prefill 8 tokens, then two decodes of 2 tokens.
    static = simulate_static(HAND, per_token, 2, 100)
    assert [r.finish for r in static.records] == [12, 10, 14]
    # Continuous: 6 prompt tokens, 2 decodes, then A's decode with B's 2 tokens.
    continuous = simulate_continuous(HAND, per_token, 2, 100)
    assert [r.finish for r in continuous.records] == [11, 8, 11]
    # A's tokens: its prefill with C's [0, 6), a decode step with C's [6, 8),
    # then a step with B's prompt [8, 11).
    assert continuous.records[0].token_times == (6, 8, 11)


def test_kv_capacity_limits_admission() -> None:
    # A reserves 4 + 3 = 7 of 9 tokens: C (4) must wait until A finishes at 3.
    result = simulate_continuous(HAND[:2], UNIT, max_batch=4, kv_capacity=9)
    assert times(result)[1] == (3, 4, 5, 5)
    # Static reserves the padded 2 x (4 + 3) = 14 > 9: two batches.
    assert simulate_static(HAND[:2], UNIT, 4, 9).records[1].admitted == 3


@pytest.mark.parametrize("policy", ["static", "continuous", "chunked"])
def test_every_token_is_computed_once(policy: str) -> None:
    # All requests at t = 0 and one second per token: the GPU never idles, so
    # the last finish is the number of tokens the policy computes.
    trace = [Request(i, 0.0, p, o) for i, (p, o) in enumerate([(5, 3), (2, 7), (9, 1)])]
    per_token = LinearStepCost(0.0, 1.0)
    if policy == "static":  # padded: 3 x 9 prompt tokens, 6 decodes of 3
        result, tokens = simulate_static(trace, per_token, 3, 100), 27 + 18
    else:  # each prompt once, each later output token once
        budget = None if policy == "continuous" else 4
        result = simulate_continuous(trace, per_token, 3, 100, budget)
        tokens = (5 + 2 + 9) + (2 + 6 + 0)
    assert max(r.finish for r in result.records) == tokens
    for r in result.records:
        assert r.request.arrival <= r.admitted < r.first_token <= r.finish
        assert r.finish <= r.released


def test_one_request_at_a_time_is_an_md1_queue() -> None:
    # One-token outputs and one-second steps: a single server with deterministic
    # service D = 1 s. Pollaczek-Khinchine: mean time in system D + rho D / (2 (1 -
    # rho)) = 1.5 s at rho = 0.5; 2000 requests give a standard error near 3 %.
    trace = poisson_trace(2000, rate=0.5, prompt=(1, 1), output=(1, 1), seed=0)
    result = simulate_continuous(trace, UNIT, max_batch=1, kv_capacity=10)
    assert np.mean([r.ttft for r in result.records]) == pytest.approx(1.5, rel=0.1)


def test_batch_of_one_makes_static_and_continuous_agree() -> None:
    trace = poisson_trace(40, 50.0, (16, 256), (1, 64), seed=3)
    cost = RooflineStepCost(preset("llama-3-8b"), GPUS["H100"])
    a = simulate_static(trace, cost, 1, 10_000)
    b = simulate_continuous(trace, cost, 1, 10_000)
    for x, y in zip(a.records, b.records, strict=True):
        assert x.finish == pytest.approx(y.finish, rel=1e-12)
        assert x.first_token == pytest.approx(y.first_token, rel=1e-12)


def test_continuous_beats_static_and_chunking_cuts_tail_tpot_under_load() -> None:
    trace = poisson_trace(200, 30.0, (128, 2048), (16, 512), seed=1)
    cost = RooflineStepCost(preset("llama-3-8b"), GPUS["H100"])
    static = latency_summary(simulate_static(trace, cost, 64, 400_000).records)
    whole = latency_summary(simulate_continuous(trace, cost, 64, 400_000).records)
    chunked = simulate_continuous(trace, cost, 64, 400_000, token_budget=512)
    chunked = latency_summary(chunked.records)
    assert whole["throughput"] > 1.5 * static["throughput"]
    assert whole["ttft_p99"] < static["ttft_p99"] / 5
    assert chunked["tpot_p99"] < whole["tpot_p99"]


def test_roofline_step_flops_match_flop_counter() -> None:
    c = TransformerConfig(
        vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2
    )
    model = Transformer(c)
    gen = torch.Generator().manual_seed(0)
    batch, cached, chunk = 3, 5, 4
    caches = model.new_caches(batch)
    model(torch.randint(0, 64, (batch, cached), generator=gen), caches)
    unit = Gpu("one FLOP per second", 1.0, 1e30, 1, 1)  # time = FLOPs
    cost = RooflineStepCost(c, unit)
    with FlopCounterMode(display=False) as counter:
        model(torch.randint(0, 64, (batch, 1), generator=gen), caches)
    assert cost([], batch, batch * cached) == counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:  # a chunk of 4 prompt tokens
        model(torch.randint(0, 64, (batch, chunk), generator=gen), caches)
    # The counter also counts the masked pairs above the diagonal of the chunk.
    masked = 4 * c.n_layers * c.n_heads * c.head_dim * batch * chunk * (chunk - 1) // 2
    step = cost([(chunk, cached + 1)] * batch, 0, 0)
    assert step == counter.get_total_flops() - masked


def test_roofline_step_bytes_of_llama3_8b_decode() -> None:
    # By hand from the architecture: per layer q, o 4096^2, k, v 4096 x 1024, MLP
    # 3 x 4096 x 14336; head 128256 x 4096; KV 2 x 8 x 128 x 32 elements per token.
    weights = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 128256 * 4096
    weights += (2 * 32 + 1) * 4096 + 2 * 4096  # RMSNorm gains; two embedding rows
    kv = 2 * 8 * 128 * 32
    h100 = GPUS["H100"]
    cost = RooflineStepCost(preset("llama-3-8b"), h100)
    # batch 2 at 100 cached tokens each: memory-bound, 200 read and 2 written
    expected = (2 * weights + 2 * kv * 202) / h100.hbm_bandwidth
    assert cost([], 2, 200) == pytest.approx(expected, rel=1e-12)


def test_roofline_step_cache_bytes_match_allocated_cache() -> None:
    c = TransformerConfig(
        vocab_size=64, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2
    )
    caches = Transformer(c).new_caches(1, 8, torch.bfloat16)
    per_token = sum(x.k.nbytes + x.v.nbytes for x in caches) // 8
    assert RooflineStepCost(c, GPUS["H100"]).kv_bytes == per_token


def test_poisson_trace_is_reproducible_and_has_the_rate() -> None:
    a = poisson_trace(4000, 8.0, (1, 10), (5, 5), seed=7)
    assert a == poisson_trace(4000, 8.0, (1, 10), (5, 5), seed=7)
    assert a != poisson_trace(4000, 8.0, (1, 10), (5, 5), seed=8)
    gaps = np.diff([0.0] + [r.arrival for r in a])
    assert gaps.mean() == pytest.approx(1 / 8, rel=0.05)  # 4000 gaps: 1.6 % s.e.
    assert {r.prompt for r in a} == set(range(1, 11)) and {r.output for r in a} == {5}


def test_latency_summary_by_hand() -> None:
    records = [
        Record((1.0, 2.0, 3.0), Request(0, 0.0, 4, 3), 0.0, 3.0),  # TTFT 1, TPOT 1
        Record((2.0,), Request(1, 1.0, 2, 1), 1.0, 2.0),  # TTFT 1, no TPOT
        Record((4.0, 4.5, 4.5, 5.0, 5.0), Request(2, 1.0, 2, 5), 1.0, 5.0),  # 3, 0.25
    ]
    s = latency_summary(records)
    assert s["duration"] == 5.0 and s["throughput"] == 9 / 5
    assert s["ttft_p50"] == 1.0 and s["ttft_mean"] == 5 / 3
    assert s["tpot_p50"] == 0.625 and s["ttft_p99"] == pytest.approx(1 + 2 * 0.98)
    assert records[1].tpot is None and records[2].arrival == 1.0
    assert (records[2].first_token, records[2].finish) == (4.0, 5.0)


@pytest.mark.parametrize(
    ("times", "admitted", "released", "match"),
    [
        ((1.0, 2.0), 0.5, 2.0, "request.output = 3"),  # a token short
        ((1.0, 2.0, 3.0), 1.5, 3.0, "admitted = 1.5"),  # after its first token
        ((1.0, 2.0, 3.0), 0.0, 3.0, "admitted = 0.0"),  # before its arrival
        ((1.0, 2.0, 3.0), 0.5, 2.5, "released = 2.5"),  # before its last token
        ((1.0, 3.0, 2.0), 0.5, 3.0, "non-decreasing"),
    ],
)
def test_bad_record_is_refused(times, admitted, released, match) -> None:
    with pytest.raises(ValueError, match=match):
        Record(times, Request(0, 0.5, 4, 3), admitted, released)


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="rate"):
        poisson_trace(10, 0.0, (1, 2), (1, 2))
    with pytest.raises(ValueError, match="n must"):
        poisson_trace(0, 1.0, (1, 2), (1, 2))
    with pytest.raises(ValueError, match="prompt"):
        poisson_trace(10, 1.0, (5, 2), (1, 2))
    with pytest.raises(ValueError, match="output"):
        Request(0, 0.0, 3, 0)
    with pytest.raises(ValueError, match="cached"):
        Request(0, 0.0, 3, 1, cached=3)
    with pytest.raises(ValueError, match="arrival"):
        Request(0, -1.0, 3, 1)
    with pytest.raises(ValueError, match="max_batch"):
        simulate_continuous(HAND, UNIT, 0, 100)
    with pytest.raises(ValueError, match="kv_capacity=6"):
        simulate_static(HAND, UNIT, 2, 6)
    with pytest.raises(ValueError, match="token_budget"):
        simulate_continuous(HAND, UNIT, 4, 100, token_budget=3)
    with pytest.raises(ValueError, match="id"):
        simulate_continuous(HAND[1:], UNIT, 2, 100)
    with pytest.raises(ValueError, match="cached"):
        simulate_static([Request(0, 0.0, 3, 1, cached=1)], UNIT, 2, 100)
    with pytest.raises(TypeError, match="requests"):
        simulate_static([], UNIT, 2, 100)
    with pytest.raises(ValueError, match="dense"):
        RooflineStepCost(preset("mixtral-8x7b"), GPUS["H100"])
    with pytest.raises(ValueError, match="overhead"):
        RooflineStepCost(preset("llama-3-8b"), GPUS["H100"], overhead=-1.0)
    with pytest.raises(ValueError, match="at least one request"):
        latency_summary([])
    with pytest.raises(TypeError, match="request must"):
        Record((1.0,), (0, 0.0, 1, 1), 0.0, 1.0)


def test_chunked_prefill_costs_little_ttft_at_low_load_and_saves_it_under_load():
    # What the page says of its own sweep: at the lowest rate chunking adds a few
    # per cent to p99 TTFT (a prompt takes several steps); at the tail rate it
    # lowers p99 TTFT against continuous batching (the figure).
    from aiinfra.book.inference import batching as page

    low = [page.at_low_rate(p, "ttft_p99") for p in ("chunked", "continuous")]
    tail = [page.at_tail_rate(p, "ttft_p99") for p in ("chunked", "continuous")]
    assert low[1] < low[0] < 1.2 * low[1]
    assert tail[0] < 0.5 * tail[1]
