"""Tests of the prefill/decode disaggregation model: hand schedules and transfers."""

import pytest
from aiinfra.accelerators import GPUS
from aiinfra.comm.cost import LinkModel
from aiinfra.infer.batching.disagg import (
    kv_transfer_time,
    simulate_colocated,
    simulate_disaggregated,
)
from aiinfra.infer.step_cost import LinearStepCost, RooflineStepCost
from aiinfra.infer.trace import Request, latency_summary, poisson_trace
from aiinfra.models.presets import preset

UNIT = LinearStepCost(fixed=1.0)
HALF_SECOND = LinkModel(alpha=0.5, beta=0.0)  # every transfer takes 0.5 s


def test_kv_transfer_time_of_a_llama3_8b_prompt_by_hand() -> None:
    # 1000 tokens x 2 x 8 KV heads x 128 x 32 layers x 2 bytes over 50 GB/s + 5 us
    link = LinkModel(alpha=5e-6, beta=1 / 50e9)
    seconds = kv_transfer_time(1000, 2 * 8 * 128 * 32 * 2, link)
    assert seconds == pytest.approx(5e-6 + 1000 * 131072 / 50e9, rel=1e-12)


def test_disaggregated_hand_schedule() -> None:
    # One prefill GPU runs both prompts in [0, 1); B (one token) is done at 1. A's
    # cache reaches the decode GPU at 1.5, which makes its tokens 2 and 3 at 2.5
    # and 3.5: TTFT 1, TPOT (3.5 - 1) / 2.
    trace = [Request(7, 0.0, 4, 3), Request(3, 0.0, 2, 1)]
    a, b = simulate_disaggregated(trace, UNIT, 1, 1, HALF_SECOND, 10, 4, 100)
    assert (a.admitted, a.first_token, a.finish) == (0, 1, 3.5)
    assert a.token_times == (1, 2.5, 3.5) and a.released == 3.5
    assert (b.first_token, b.finish) == (1, 1)
    assert a.ttft == 1 and a.tpot == 1.25 and a.request is trace[0]


def test_disaggregation_removes_prefill_stalls_from_tpot() -> None:
    # Colocated on one GPU (one second per token), A decodes while B's 20-token
    # prompt arrives: the step that holds B's prompt takes 21 s and A's TPOT grows.
    # Disaggregated on 1 + 1 GPUs, A decodes alone at 1 s per token.
    per_token = LinearStepCost(0.0, 1.0)
    trace = [Request(0, 0.0, 1, 6), Request(1, 1.5, 20, 1)]
    (a, _) = simulate_colocated(trace, per_token, 1, 4, 100)
    assert a.finish == 1 + 1 + 21 + 3 and a.tpot == 5
    link = LinkModel(alpha=0.0, beta=0.0)
    (a, b) = simulate_disaggregated(trace, per_token, 1, 1, link, 1, 4, 100)
    assert a.finish == 6 and a.tpot == 1 and b.first_token == 21.5


def test_round_robin_spreads_requests_over_gpus() -> None:
    # Four equal requests at t = 0 on two GPUs of one second per step: two per GPU,
    # each GPU runs both in one batch, so all finish after 1 + 2 steps.
    trace = [Request(i, 0.0, 3, 3) for i in range(4)]
    assert [r.finish for r in simulate_colocated(trace, UNIT, 2, 4, 100)] == [3] * 4
    # max_batch 1: the second request of each GPU waits for the first.
    one_at_a_time = simulate_colocated(trace, UNIT, 2, 1, 100)
    assert [r.finish for r in one_at_a_time] == [3, 3, 6, 6]


def test_every_request_finishes_after_its_transfer() -> None:
    trace = poisson_trace(60, 40.0, (64, 1024), (1, 64), seed=5)
    cost = RooflineStepCost(preset("llama-3-8b"), GPUS["H100"])
    link = LinkModel(alpha=5e-6, beta=1 / 50e9)
    records = simulate_disaggregated(trace, cost, 2, 1, link, cost.kv_bytes, 32, 10**5)
    for r in records:
        assert r.request.arrival <= r.admitted < r.first_token
        if r.request.output > 1:  # the second token needs the cache moved first
            gap = kv_transfer_time(r.request.prompt, cost.kv_bytes, link)
            assert r.finish > r.first_token + gap
    assert latency_summary(records)["output_tokens"] == sum(r.output for r in trace)


def test_bad_input_is_rejected() -> None:
    trace = [Request(0, 0.0, 4, 3)]
    with pytest.raises(ValueError, match="prompt"):
        kv_transfer_time(0, 10, HALF_SECOND)
    with pytest.raises(TypeError, match="link"):
        kv_transfer_time(10, 10, "nvlink")
    with pytest.raises(ValueError, match="n_prefill"):
        simulate_disaggregated(trace, UNIT, 0, 1, HALF_SECOND, 10, 4, 100)
    with pytest.raises(ValueError, match="kv_bytes_per_token"):
        simulate_disaggregated(trace, UNIT, 1, 1, HALF_SECOND, 0, 4, 100)
    with pytest.raises(ValueError, match="n_gpus"):
        simulate_colocated(trace, UNIT, 0, 4, 100)
    with pytest.raises(ValueError, match="unique"):
        simulate_colocated(trace * 2, UNIT, 1, 4, 100)
    with pytest.raises(TypeError, match="requests"):
        simulate_colocated([], UNIT, 1, 4, 100)
    with pytest.raises(ValueError, match="kv_capacity"):
        simulate_disaggregated(trace, UNIT, 1, 1, HALF_SECOND, 10, 4, 5)
