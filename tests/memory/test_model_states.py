"""Model states: ZeRO's formulas, its Figure 1, and bytes weighed after a real step."""

import pytest
from aiinfra.memory.experiments import measure_model_states
from aiinfra.memory.model_states import (
    GRADIENT_LAYOUTS,
    gradient_layout,
    model_states_bytes,
    zero_model_states_bytes,
)
from aiinfra.memory.tiny_gpt import tiny_gpt_config
from aiinfra.models.params import count_parameters

PSI = count_parameters(tiny_gpt_config()).total  # the measured model's parameters


def test_zero_figure_1_numbers():
    # Rajbhandari et al. 2020, Fig. 1: Psi = 7.5B, N_d = 64, K = 12 gives 120 GB,
    # 31.4 GB, 16.6 GB and 1.88 GB per device for stages 0 to 3 (GB = 1e9 bytes).
    psi, nd = 7_500_000_000, 64
    published = [120, 31.4, 16.6, 1.88]
    for stage, gb in enumerate(published):
        total = zero_model_states_bytes(psi, stage, nd).total / 1e9
        assert total == pytest.approx(gb, abs=0.05)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_stages_follow_the_section_5_formulas(stage):
    psi, nd, k = 1000, 8, 12
    expected = {
        0: (2 + 2 + k) * psi,
        1: 4 * psi + k * psi / nd,
        2: 2 * psi + (2 + k) * psi / nd,
        3: (2 + 2 + k) * psi / nd,
    }[stage]
    parts = zero_model_states_bytes(psi, stage, nd, k)
    assert parts.total == pytest.approx(expected)
    assert parts.params + parts.grads + parts.optimizer == parts.total


def test_zero_with_one_rank_is_ddp():
    assert zero_model_states_bytes(10, 3, 1) == zero_model_states_bytes(10, 0, 64)
    assert model_states_bytes(10).total == 160


def test_fp32_adamw_states_weigh_16_bytes_per_parameter_plus_step_counters():
    measured, formula, n_tensors = measure_model_states(mixed=False)
    assert (formula.params, formula.grads, formula.optimizer) == (
        4 * PSI,
        4 * PSI,
        8 * PSI,
    )
    assert (measured.params, measured.grads) == (formula.params, formula.grads)
    # AdamW keeps a 0-dim fp32 `step` tensor per parameter tensor: 4 bytes each.
    assert measured.optimizer == formula.optimizer + 4 * n_tensors


def test_bf16_with_master_weights_weighs_2_plus_2_plus_12_bytes_per_parameter():
    measured, formula, n_tensors = measure_model_states(mixed=True)
    assert (formula.params, formula.grads, formula.optimizer) == (
        2 * PSI,
        2 * PSI,
        12 * PSI,
    )
    assert (measured.params, measured.grads) == (formula.params, formula.grads)
    assert measured.optimizer == formula.optimizer + 4 * n_tensors


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_params": 10, "stage": 4, "dp": 2}, "stage"),
        ({"n_params": 10, "stage": 1, "dp": 0}, "dp"),
        ({"n_params": -1, "stage": 1, "dp": 2}, "n_params"),
    ],
)
def test_bad_zero_arguments_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        zero_model_states_bytes(**kwargs)


# Megatron Core developer guide, "Distributed Optimizer": theoretical bytes per
# parameter, non-distributed and distributed (d data-parallel ranks):
# float16 param + float16 grads 20 and 4 + 16/d; float16 param + fp32 grads 18 and
# 6 + 12/d. Megatron's distributed optimizer shards what ZeRO-1 shards.
MEGATRON = {"bf16+fp32": (20, 4, 16), "fp32": (18, 6, 12)}


@pytest.mark.parametrize("layout", list(MEGATRON))
@pytest.mark.parametrize("d", [1, 8, 64])
def test_gradient_layouts_give_megatrons_bytes_per_parameter(layout, d):
    whole, replicated, sharded = MEGATRON[layout]
    k, grad_bytes = gradient_layout(layout)[::-1]
    assert zero_model_states_bytes(1, 0, d, k, grad_bytes).total == whole
    stage1 = zero_model_states_bytes(1, 1, d, k, grad_bytes).total
    assert stage1 == pytest.approx(replicated + sharded / d)


@pytest.mark.parametrize("n", [1, 8, 64])
def test_bf16_plus_fp32_layout_gives_deepspeeds_stage_2_estimate(n):
    # DeepSpeed 0.19's estimate_zero2_model_states_mem_needs: 2 Psi + 18 Psi / N
    # per GPU (FACTS: "their ZeRO-2 GPU formula is 2P + 18P/G").
    grad_bytes, k = GRADIENT_LAYOUTS["bf16+fp32"]
    total = zero_model_states_bytes(1, 2, n, k, grad_bytes).total
    assert total == pytest.approx(2 + 18 / n)


def test_the_paper_layout_is_16_bytes_and_unknown_layouts_are_rejected():
    grad_bytes, k = gradient_layout("bf16")
    assert zero_model_states_bytes(1, 0, 1, k, grad_bytes).total == 16
    with pytest.raises(ValueError, match="grad_dtype must be one of"):
        gradient_layout("fp8")
    with pytest.raises(ValueError, match="grad_bytes"):
        zero_model_states_bytes(1, 0, 1, grad_bytes=-2)
