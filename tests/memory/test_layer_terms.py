"""The layer a config describes: Table 2 for GPT, saved-tensor hooks for Llama.

Ground truths: Korthikanti et al. 2022, Table 2 (the GPT layer, every row), the
tensors that autograd saves in the package's own Transformer blocks built from the
Llama 3, Mistral and Qwen2.5 configs (shrunk 64 times, same H, G and f/h, in fp32;
the eager RMSNorm's normalised input and 1/rms and the causal mask, which the count
leaves out as the paper leaves out LayerNorm's statistics, are added explicitly),
and Megatron-LM's fused SwiGLU (``megatron/core/fusions/fused_bias_swiglu.py``:
``SwiGLUFunction.forward`` saves only its input, the 2f-wide output of the first
linear). Tolerance: none.
"""

import dataclasses

import pytest
from aiinfra.memory.activations import activation_bytes_per_layer
from aiinfra.memory.experiments import (
    eager_extras_bytes,
    measure_config_layers,
    shrunk_config,
)
from aiinfra.memory.layer_terms import layer_activation_bytes, layer_activation_terms
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import preset

GPT = TransformerConfig(
    d_model=12288,
    n_heads=96,
    d_ff=4 * 12288,
    norm="layernorm",
    mlp="gelu",
    position="learned",
    bias=True,
    max_seq_len=2048,
)  # GPT-3 175B's layer


@pytest.mark.parametrize("attention", ["materialised", "flash"])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("tp, sp", [(1, False), (8, False), (8, True)])
def test_gpt_layer_gives_table_2(tp, sp, recompute, attention):
    s, b = 2048, 2
    paper = activation_bytes_per_layer(s, b, 12288, 96, tp, sp, recompute, attention)
    ours = layer_activation_bytes(GPT, s, b, tp, sp, recompute, attention)
    assert ours == pytest.approx(paper, rel=1e-12)


@pytest.mark.parametrize(
    "name, window, qkv_bias",
    [
        ("llama-3-8b", 0, False),  # GQA 32/8, f = 3.5 h
        ("mistral-7b", 8, False),  # a sliding window shorter than s
        ("qwen2.5-72b", 0, True),  # GQA 64/8, QKV biases, f = 3.61 h
        ("llama-3-405b", 0, False),  # GQA 128/8, f = 3.25 h
    ],
)
def test_measured_llama_family_layer_equals_the_count(name, window, qkv_bias):
    s, b = 16, 2
    cfg = dataclasses.replace(
        shrunk_config(preset(name), s=s), sliding_window=window, n_layers=2
    )
    assert cfg.qkv_bias == qkv_bias
    measured = measure_config_layers(cfg, b, s).forward_bytes
    counted = sum(layer_activation_terms(cfg, s, b, act_bytes=4).values())
    assert measured == 2 * (counted + eager_extras_bytes(cfg, b, s))


def test_swiglu_at_3_5_h_keeps_28_sbh_eager_and_21_fused():
    cfg = preset("llama-3-8b")  # f = 14336 = 3.5 h
    s, b, h = 8192, 1, cfg.d_model
    sbh = s * b * h

    def mlp(attention):
        terms = layer_activation_terms(cfg, s, b, attention=attention)
        inner = [k for k in terms if k.startswith("MLP") and "norm" not in k]
        return sum(terms[k] for k in inner if "first linear" not in k) / sbh

    assert mlp("materialised") == 4 * 2 * 3.5  # gate, up, SiLU, product: 28
    assert mlp("flash") == 3 * 2 * 3.5  # [gate, up] and product (Megatron): 21


def test_gqa_keeps_k_and_v_at_g_heads():
    cfg = preset("llama-3-8b")  # H = 32, G = 8
    terms = layer_activation_terms(cfg, 8192, 1, tp=8, sp=True, attention="flash")
    assert terms["attention: K"] == terms["attention: Q"] * 8 / 32
    assert terms["attention: V"] == 2 * 8192 * 8 * 128 / 8


@pytest.mark.parametrize(
    "cfg, args, error",
    [
        (preset("deepseek-v3"), {}, ValueError),  # MLA and experts
        (preset("llama-3-8b"), {"tp": 16}, ValueError),  # 16 does not divide G = 8
        (preset("llama-3-8b"), {"tp": 3, "sp": True}, ValueError),
        (preset("llama-3-8b"), {"recompute": "some"}, ValueError),
        (preset("llama-3-8b"), {"attention": "fused"}, ValueError),
        (preset("llama-3-8b"), {"b": 0}, ValueError),
        ({"d_model": 4096}, {}, TypeError),
    ],
)
def test_bad_input_is_rejected(cfg, args, error):
    with pytest.raises(error):
        layer_activation_terms(cfg, **{"s": 8192, "b": 1, **args})


def test_measurement_rejects_a_gpt_config():
    with pytest.raises(ValueError, match="Llama-family"):
        measure_config_layers(dataclasses.replace(GPT, max_seq_len=16), 1, 16)
    with pytest.raises(ValueError, match="must divide"):
        shrunk_config(preset("llama-3-8b"), k=3)
