"""Korthikanti et al. 2022, Table 2: the formulas, and bytes measured on a tiny GPT.

Tolerance: none. The measured bytes equal the paper's terms at the measured element
size plus the LayerNorm mean and 1/std (2 norms x 2 x sb elements), which the paper
leaves out; that residual is asserted explicitly, not absorbed in a tolerance.
"""

import pytest
import torch
from aiinfra.memory.activations import (
    CORE_TERMS,
    activation_bytes_per_layer,
    saved_activation_terms,
)
from aiinfra.memory.experiments import (
    layer_norm_stats_bytes,
    measure_layers,
    predicted_layer_bytes,
)
from aiinfra.memory.tiny_gpt import tiny_gpt_config

S, B, H, A = 16, 2, 32, 4  # s, b, h, a of the measured layer


def test_paper_terms_add_up_to_table_2():
    s, b, h, a = 2048, 1, 12288, 96  # GPT-3 175B
    terms = saved_activation_terms(s, b, h, a)
    assert sum(terms.values()) == s * b * h * (34 + 5 * a * s / h)
    core = sum(terms[k] for k in CORE_TERMS)
    assert core == 5 * a * s * s * b  # what selective recomputation drops


@pytest.mark.parametrize("e, m", [(2, 1), (4, 1), (1, 1)])
def test_terms_at_any_element_size(e, m):
    s, b, h, a = 8, 3, 16, 2
    total = sum(saved_activation_terms(s, b, h, a, e, m).values())
    assert total == s * b * h * (16 * e + 2 * m) + a * s * s * b * (2 * e + m)


def test_table_2_rows_are_consistent():
    s, b, h, a, t = 2048, 2, 12288, 96, 8
    sbh = s * b * h
    f = activation_bytes_per_layer
    assert f(s, b, h, a) == sbh * (34 + 5 * a * s / h)
    assert f(s, b, h, a, tp=t) == sbh * (10 + 24 / t + 5 * a * s / (h * t))
    assert f(s, b, h, a, tp=t, sp=True) == pytest.approx(f(s, b, h, a) / t)
    assert f(s, b, h, a, tp=t, recompute="selective") == sbh * (10 + 24 / t)
    assert f(s, b, h, a, tp=t, sp=True, recompute="selective") == 34 * sbh / t
    assert f(s, b, h, a, tp=t, sp=True, recompute="full") == 2 * sbh
    assert f(s, b, h, a, tp=1) == f(s, b, h, a, tp=1, sp=True)  # t = 1: no split


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_measured_bf16_layer_equals_table_2_plus_layernorm_stats(recompute):
    config = tiny_gpt_config(seq_len=S, n_layers=1, n_heads=A, d_model=H)
    measured = measure_layers(config, B, torch.bfloat16, recompute).forward_bytes
    paper = activation_bytes_per_layer(S, B, H, A, recompute=recompute)
    stats = 0 if recompute == "full" else layer_norm_stats_bytes(S, B, 2)
    assert measured == paper + stats
    assert measured == predicted_layer_bytes(S, B, H, A, 2, recompute)


def test_measured_fp32_layers_use_4_byte_activations_and_1_byte_masks():
    config = tiny_gpt_config(seq_len=S, n_layers=2, n_heads=A, d_model=H)
    m = measure_layers(config, B, torch.float32)
    assert m.forward_bytes == 2 * predicted_layer_bytes(S, B, H, A, 4)
    masks = [e for e in m.log.entries if e.dtype == torch.bool]
    assert len(masks) == 2 * 3  # three dropout masks per layer, one byte each
    assert m.log.live_bytes == 0  # everything released after backward


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"s": 0}, "s must"),
        ({"a": 5}, "divide"),
        ({"tp": 3}, "tp"),
        ({"tp": 4, "sp": True, "s": 6}, "sequence parallelism"),
        ({"recompute": "some"}, "recompute"),
    ],
)
def test_bad_activation_arguments_are_rejected(kwargs, match):
    args = {"s": 16, "b": 1, "h": 32, "a": 4, **kwargs}
    with pytest.raises(ValueError, match=match):
        activation_bytes_per_layer(**args)
