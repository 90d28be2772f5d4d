"""The claims the KV-eviction, pre-flight and GEMM-planner pages make in words.

Each page computes its numbers; the words around them ("sinks do not help this
model", "least-loaded does no better than round-robin", "the first choice stays")
are checked here against those same values, so a re-measurement that changes
them fails here instead of leaving the prose wrong.
"""

import pytest
from aiinfra.book.cloud import preflight
from aiinfra.book.inference import kv_eviction as ev
from aiinfra.book.training import planner


def test_eviction_costs_the_copy_and_sinks_do_not_help_this_model():
    full, lag = ev.ev_full_ppl(), ev.ev_lag()
    # "a window that still holds the token lag back costs almost nothing"
    assert ev.ev_window_ppl(lag) < 1.02 * full
    # "a shorter window loses the copy, and perplexity jumps"
    assert ev.ev_window_ppl(12) > 3 * full
    # "at a budget of 16 [sinks] take slots from the window, which then misses it"
    assert ev.ev_sink_ppl(lag) > 3 * ev.ev_window_ppl(lag)
    # "has grown no attention sink": less than uniform attention on token 0
    for layer in (0, 1):
        assert ev.ev_first_token_mass(layer) < ev.ev_uniform_mass()
    assert ev.ev_floor_ppl() < full


def test_routing_claims():
    R = ev.SHOWN_REPLICAS
    # "with one replica every router is the same"
    hits_1 = {r: ev.rt_hit_rate(r, 1) for r in ("round-robin", "least-loaded")}
    assert (
        hits_1["round-robin"]
        == hits_1["least-loaded"]
        == ev.rt_hit_rate("prefix-aware", 1)
    )
    # round-robin's hit rate falls with replicas; prefix-aware keeps more at eight
    assert ev.rt_hit_rate("round-robin", 8) < ev.rt_hit_rate("round-robin", 1)
    assert ev.rt_hit_rate("prefix-aware", 8) > ev.rt_hit_rate("round-robin", 8)
    # "least-loaded does no better than round-robin here"
    for n in ev.REPLICAS:
        assert ev.rt_hit_rate("least-loaded", n) == ev.rt_hit_rate("round-robin", n)
    # faster, but "less than the ratio of tokens"
    rr, pa = ev._routing("round-robin", R), ev._routing("prefix-aware", R)
    assert 1 < ev.rt_speedup(R) < sum(rr.computed) / sum(pa.computed)
    # "the price is balance": round-robin spreads evenly, prefix-aware does not
    assert ev.rt_imbalance("round-robin", 8) == pytest.approx(1.0)
    assert ev.rt_imbalance("prefix-aware", 8) > 1.5


def test_preflight_flags_the_straggler_and_the_sdc_rank_is_not_slow():
    ratio, ranks = preflight.straggler_ratio(), preflight.run_value("ranks")
    slow, sdc = preflight.run_value("slow"), preflight.run_value("sdc")
    assert preflight.times_median(slow) > ratio
    for rank in set(range(ranks)) - {slow}:
        assert preflight.times_median(rank) < ratio  # "the SDC rank is not slower"
    assert sdc != slow and preflight.checksum_delta() != 0
    # "level 3 ... belongs to a node taken out of service": it costs more
    assert preflight.level_cost_pct(2) < preflight.level_cost_pct(3)


def test_the_gemm_model_keeps_the_first_choice_and_table4_leads_on_matmuls():
    # "the first choice stays ..., now at a higher MFU"
    assert planner.gemm_best("shape", "layout") == planner.gemm_best(
        "constant", "layout"
    )
    assert planner.gemm_best("shape", "mfu") > planner.gemm_best("constant", "mfu")
    # Table 4's sizes: better matmuls than the first choice, a worse place
    assert planner.gemm_table4_eff() > planner.gemm_best("shape", "eff")
    assert planner.gemm_table4("shape", "rank") > 1
    # "a spill of one tile row into a second wave" halves the efficiency
    assert planner.gemm_pct(1537, 2816, 8192) < 0.55 * planner.gemm_pct(
        1536, 2816, 8192
    )
