"""Sharding variants: FSDP, HSDP on a 2-D mesh, fp32 reduce-scatter, CPU offload.

Ground truth: ``fully_shard`` itself on 4 gloo ranks (1-D mesh of 4, 2-D mesh of
2 x 2, bf16 parameters with fp32 reduction), every all-gather, reduce-scatter and
all-reduce it issues counted with its group; hand counts of the ring's bytes
(an all-gather or reduce-scatter in a group of g sends (g-1)/g of the buffer, an
all-reduce twice that); the toy's 155 parameters padded as FSDP2 pads dim 0 (the
3-row layer to 4 rows): 164. The bf16 rounding bound: one addition rounded to
bf16 errs by at most 2^-9 of the result.
"""

from __future__ import annotations

import pytest
import torch
from aiinfra.comm.cost import LINKS
from aiinfra.parallel.zero.variants import (
    RUN_VARIANTS,
    count_sharding_traffic,
    offload_hidden_tokens,
    ring_sum_error,
    sharding_collective_bytes,
    sharding_traffic,
    toy_collective_bytes,
    variants_figure,
)

TOY_PADDED_PSI = 164  # 8x6+8 + 8x8+8 + (3 -> 4)x8+4


def test_the_formula_is_the_hand_count():
    # FSDP over 4 ranks, 8 parameters, bf16 gathers, fp32 reduce: 2*3/4*8*2, 3/4*8*4
    assert sharding_collective_bytes(8, 4, 1, 2, 4) == {
        "all-gather": 24,
        "reduce-scatter": 24,
        "all-reduce": 0,
    }
    # HSDP 2 x 2: gathers and reduce-scatter in 2, all-reduce of the 4-element shard
    assert sharding_collective_bytes(8, 2, 2, 2, 4) == {
        "all-gather": 16,
        "reduce-scatter": 16,
        "all-reduce": 16,
    }


def test_the_toys_bytes_use_fsdp2s_padding():
    fsdp = toy_collective_bytes("FSDP")
    assert fsdp["all-gather"] == 2 * 3 / 4 * TOY_PADDED_PSI * 4
    assert fsdp["reduce-scatter"] == 3 / 4 * TOY_PADDED_PSI * 4
    assert toy_collective_bytes("HSDP")["all-reduce"] == TOY_PADDED_PSI / 2 * 4


def test_the_cost_model_prices_each_link_by_name():
    psi = 8e9
    hsdp = sharding_traffic("HSDP", psi, 64)  # 8 nodes of 8
    assert hsdp.scale_out == 2 * 7 / 8 * psi / 8 * 4  # the shard, all-reduced
    assert hsdp.scale_up == 7 / 8 * psi * (2 * 2 + 4)
    assert hsdp.link_seconds["ib400"] == hsdp.scale_out * LINKS["ib400"].beta
    fsdp = sharding_traffic("FSDP", psi, 64)
    assert fsdp.scale_up == 0 and fsdp.scale_out == 63 / 64 * psi * 8
    offload = sharding_traffic("FSDP + CPU offload", psi, 8)
    assert offload.host == 2 * psi / 8 * 4  # fp32 shard before each of two gathers
    assert offload.link_seconds["pcie5-x16"] == pytest.approx(offload.host / 64e9)


def test_the_offload_bound_by_hand():
    # 4 bytes x 989e12 FLOP/s / 64e9 B/s / (2 x 8 GPUs)
    assert offload_hidden_tokens(8, 989e12) == pytest.approx(3863.28125)


def test_an_fp32_wire_keeps_what_a_bf16_wire_rounds():
    assert 0 < ring_sum_error(2, torch.bfloat16) <= 2**-9
    assert ring_sum_error(8, torch.float32) < 2**-24
    assert ring_sum_error(512, torch.bfloat16) > ring_sum_error(8, torch.bfloat16)


def test_the_figure_draws_four_lines():
    fig = variants_figure(8e9, gpus=(8, 64))
    assert len(fig.axes[0].get_lines()) == 4


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sharding_collective_bytes(0, 4), "psi"),
        (lambda: sharding_traffic("ZeRO++", 1e9, 8), "variant"),
        (lambda: sharding_traffic("HSDP", 1e9, 12), "n_gpus"),
        (lambda: ring_sum_error(1, torch.bfloat16), "n_ranks"),
        (lambda: ring_sum_error(4, torch.float16), "wire"),
        (lambda: count_sharding_traffic(3), "world_size"),
        (lambda: toy_collective_bytes("DDP"), "variant"),
    ],
)
def test_bad_arguments_are_refused_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.slow
def test_fully_shard_sends_what_the_formula_says():
    counted = count_sharding_traffic(world_size=4)
    assert list(counted) == list(RUN_VARIANTS)
    for name, log in counted.items():
        totals = {k: 0 for k in ("all-gather", "reduce-scatter", "all-reduce")}
        for kind, _, sent in log:
            totals[kind] += sent
        assert totals == toy_collective_bytes(name), name
        kinds = [kind for kind, _, _ in log]
        assert kinds.count("all-gather") == 6  # 3 units, before forward and backward
        assert kinds.count("reduce-scatter") == 3
    hsdp = counted["HSDP"]
    assert {g for _, g, _ in hsdp} == {2}  # shard groups and replicate groups of 2
    assert [k for k, _, _ in hsdp].count("all-reduce") == 3
    assert {g for _, g, _ in counted["FSDP"]} == {4}
