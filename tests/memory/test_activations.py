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
    output_layer_bytes,
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
        ({"attention": "fused"}, "attention must be one of"),
    ],
)
def test_bad_activation_arguments_are_rejected(kwargs, match):
    args = {"s": 16, "b": 1, "h": 32, "a": 4, **kwargs}
    with pytest.raises(ValueError, match=match):
        activation_bytes_per_layer(**args)


# Llama 3 8B at s = 8192, b = 1: h = 4096, a = 32, L = 32, V = 128,256, so
# s b h L = 2^13 2^12 2^5 = 2^30: every coefficient of sbh is GiB for all layers.
LLAMA = {"s": 8192, "b": 1, "h": 4096, "a": 32}


def test_materialised_attention_is_the_papers_354_gib_for_llama_3_8b():
    # sbh (34 + 5as/h), 5as/h = 5 * 32 * 8192 / 4096 = 320: 354 sbh per layer.
    per_layer = activation_bytes_per_layer(**LLAMA)
    assert per_layer == 354 * 8192 * 4096
    assert 32 * per_layer / 2**30 == 354


def test_flash_attention_keeps_no_s_squared_term_and_is_11_times_smaller():
    # Per layer, written out from the saved tensors: LayerNorm inputs 2 + 2, QKV and
    # fc1 inputs 2 + 2, Q, K, V 6, O (= output projection input) 2, GELU input and
    # fc2 input 8 + 8 (units of sbh) = 32 sbh, plus the fp32 log-sum-exp 4 a s b;
    # no dropout masks, nothing of size s^2.
    sbh = 8192 * 4096
    flash = activation_bytes_per_layer(**LLAMA, attention="flash")
    assert flash == 32 * sbh + 4 * 32 * 8192
    assert 32 * flash / 2**30 == 32 + 1 / 32  # 32 GiB + 32 MiB for 32 layers
    ratio = activation_bytes_per_layer(**LLAMA) / flash
    assert 11 < ratio < 11.1  # "about ten times smaller"
    # Quadrupling s quadruples it (linear), where the paper's row grows ~ s^2.
    longer = activation_bytes_per_layer(**{**LLAMA, "s": 4 * 8192}, attention="flash")
    assert longer == 4 * flash


@pytest.mark.parametrize("t", [2, 8])
def test_flash_attention_under_tensor_and_sequence_parallelism(t):
    # Replicated under TP without SP: the two LayerNorm inputs and the QKV and fc1
    # inputs, 8 sbh (the paper's 10 sbh less its two 1-byte masks); the rest / t.
    sbh, lse = 8192 * 4096, 4 * 32 * 8192
    tp = activation_bytes_per_layer(**LLAMA, tp=t, attention="flash")
    assert tp == 8 * sbh + 24 * sbh / t + lse / t
    sp = activation_bytes_per_layer(**LLAMA, tp=t, sp=True, attention="flash")
    assert sp == (32 * sbh + lse) / t
    full = activation_bytes_per_layer(
        **LLAMA, tp=t, recompute="full", attention="flash"
    )
    assert full == 2 * sbh


def test_output_layer_is_korthikanti_4sbh_1_plus_v_over_h():
    # Korthikanti et al. Sec. 4.1: 4 sbh (1 + V/h). Llama 3 8B: 4 * 8192 * 4096 +
    # 4 * 8192 * 128256 = 134,217,728 + 4,202,692,608 bytes (fp32 logits: 3.9 GiB).
    assert output_layer_bytes(8192, 1, 4096, 128256) == 134_217_728 + 4_202_692_608
    assert output_layer_bytes(8192, 1, 4096, 128256, tp=8) == (
        134_217_728 + 4_202_692_608 / 8
    )
    with pytest.raises(ValueError, match="v must be a positive integer"):
        output_layer_bytes(8192, 1, 4096, 0)
    with pytest.raises(ValueError, match="tp must be a positive integer"):
        output_layer_bytes(8192, 1, 4096, 8, tp=0)
