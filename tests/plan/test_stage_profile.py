"""Work and memory per pipeline rank: Llama 3's split, hand-counted FLOPs.

Ground truths: Llama 3 405B has 126 layers (Dubey et al. 2024, Table 3) and ran
16 pipeline stages with one layer fewer on the first and the last stage (Sec.
3.3.2), which is 7 + 14 x 8 + 7; the head's training FLOPs against a layer's,
counted by hand from the config; 1F1B's p micro-batches in flight on the first
rank (Narayanan et al. 2021).
"""

import pytest
from aiinfra.models.presets import preset
from aiinfra.plan.job import Job, Layout
from aiinfra.plan.stage_memory import stage_estimate
from aiinfra.plan.stage_profile import split_layers, stage_profile

JOB = Job(preset("llama-3-405b"), "H100", 16384, 2**24, 8192, grad_dtype="fp32")
LAYOUT = Layout(dp=128, tp=8, pp=16, cp=1, zero=2, micro_batch=1)


def test_llama3_split_is_7_then_fourteen_8_then_7():
    assert split_layers(126, 16, trim=1) == [7] + [8] * 14 + [7]
    assert split_layers(10, 4) == [3, 3, 2, 2]  # the remainder to the first
    assert sum(split_layers(80, 6, trim=2)) == 80


def test_the_last_stage_adds_the_head_as_a_fraction_of_a_layer():
    h, H, G, d, f, V, T = 16384, 128, 8, 128, 53248, 128256, 8192
    layer = 6 * (2 * h * H * d + 2 * h * G * d + 3 * h * f) + 12 * H * d * T
    head = 6 * V * h
    loads = stage_profile(JOB, LAYOUT, trim=1)
    assert loads[-1].work == pytest.approx(7 + head / layer, rel=1e-12)
    assert [load.work for load in loads[:-1]] == [7] + [8] * 14


def test_the_first_stage_keeps_p_micro_batches_and_the_middle_no_embedding():
    loads = stage_profile(JOB, LAYOUT, layers=[8] * 16)
    one = stage_estimate(JOB, LAYOUT, 8)
    assert loads[0].activations == 16 * one.activations  # p in flight on rank 0
    assert loads[-1].activations == one.activations
    assert loads[-1].logits == one.logits and loads[0].logits == 0
    states = one.params + one.grads + one.optimizer
    vh = JOB.model.vocab_size * JOB.model.d_model
    assert loads[1].states == pytest.approx(states * (1 - vh / one.n_params))
    trimmed = stage_profile(JOB, LAYOUT, trim=1)
    assert trimmed[0].total < loads[0].total  # Llama 3's reason for the first


@pytest.mark.parametrize(
    "args, match",
    [
        ((4, 8, 0), "leave one empty"),
        ((8, 1, 1), "trim must be"),
        ((0, 2, 0), "n_layers must be"),
        ((8, 2, -1), "trim must be"),
    ],
)
def test_bad_splits_are_rejected(args, match):
    with pytest.raises(ValueError, match=match):
        split_layers(*args)
    with pytest.raises(ValueError, match="layers must be 16 positive counts"):
        stage_profile(JOB, LAYOUT, layers=[8] * 15)
