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
import torch
from aiinfra.memory.activations import activation_bytes_per_layer
from aiinfra.memory.experiments import (
    eager_extras_bytes,
    measure_config_layers,
    shrunk_config,
)
from aiinfra.memory.layer_terms import (
    layer_activation_bytes,
    layer_activation_terms,
    model_activation_bytes,
)
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


# DeepSeek-V3, Mixtral and Qwen1.5-MoE made small: the same switches (MLA with
# compressed queries, sigmoid routing in groups, a shared expert, Qwen's shared
# gate, top-k without renormalisation), widths a CPU runs in milliseconds.
SMALL = {
    "d_model": 16,
    "head_dim": 4,
    "d_ff": 24,
    "vocab_size": 64,
    "max_seq_len": 16,
}
SMALL_MLA = {"n_heads": 4, "n_kv_heads": 4, "kv_lora_rank": 6, "rope_head_dim": 2}


def small(name, **changes):
    cfg = preset(name)
    moe = {"n_experts": 8, "d_expert": 6, "top_k": 2} if cfg.n_experts else {}
    if cfg.n_groups > 1:
        moe |= {"n_groups": 4, "topk_groups": 2}
    if cfg.n_shared:
        moe["d_shared"] = 10 if cfg.d_shared is not None else None
    mla = (
        {**SMALL_MLA, "q_lora_rank": 10 if cfg.q_lora_rank else 0} if cfg.is_mla else {}
    )
    return dataclasses.replace(cfg, **{**SMALL, **mla, **moe, **changes})


@pytest.mark.parametrize(
    "name, changes",
    [
        ("deepseek-v3", {"n_layers": 2, "first_dense_layers": 1}),  # dense + MoE
        ("deepseek-v3", {"n_layers": 1, "first_dense_layers": 0, "top_k": 3}),
        ("deepseek-v2", {"n_layers": 2, "first_dense_layers": 1}),  # softmax, groups
        (
            "deepseek-v3",
            {
                "n_layers": 1,
                "q_lora_rank": 0,
                "n_experts": 0,
                "top_k": 0,
                "d_expert": 0,
                "n_shared": 0,
                "d_shared": None,
                "router": "softmax",
                "routed_scale": 1.0,
                "n_groups": 1,
                "topk_groups": 1,
                "group_score": "max",
                "first_dense_layers": 0,
            },
        ),  # dense MLA, full-rank queries
        ("mixtral-8x7b", {"n_layers": 2, "n_heads": 4, "n_kv_heads": 2}),
        ("qwen1.5-moe-a2.7b", {"n_layers": 1, "n_heads": 4, "n_kv_heads": 4}),
    ],
)
@pytest.mark.parametrize("s, b", [(16, 2), (5, 3)])
def test_measured_mla_and_moe_layers_equal_the_count(name, changes, s, b):
    cfg = small(name, **changes)
    measured = measure_config_layers(cfg, b, s).forward_bytes
    counted = sum(
        sum(layer_activation_terms(cfg, s, b, act_bytes=4, layer=i).values())
        for i in range(cfg.n_layers)
    )
    extras = cfg.n_layers * eager_extras_bytes(cfg, b, s)
    assert measured == counted + extras


def test_model_activation_bytes_counts_dense_layers_first():
    cfg = preset("deepseek-v3")  # 3 dense layers, then 58 with experts
    s, b = 4096, 1
    dense = layer_activation_bytes(cfg, s, b, layer=0)
    moe = layer_activation_bytes(cfg, s, b)
    assert model_activation_bytes(cfg, s, b) == 3 * dense + 58 * moe
    assert moe > dense  # K = 8 experts of 2048 and a shared one against f = 18432


def test_deepseek_v3_layer_by_hand():
    # h = 7168, H = 128, d = 128, d^R = 64, d_c = 512, d_c' = 1536; E = 256,
    # K = 8, f_e = 2048, one shared expert of 2048; flash kernels, bf16.
    cfg = preset("deepseek-v3")
    s, b, e = 4096, 1, 2
    n = s * b
    terms = layer_activation_terms(cfg, s, b, attention="flash")
    attention = (
        e * n * (2 * 7168 + 2 * 1536 + 2 * 512 + 2 * 128 * 192 + 2 * 128 * 128)
        + 4 * n * 128
    )
    router = 4 * n * 7168 + 4 * n * 256 + 8 * n * 8 + 4 * n * 9
    routed = 16 * n * 8 + e * n * 8 * (7168 + 3 * 2048 + 2 * 7168 + 1)
    mlp = 2 * e * n * 7168 + router + routed + 3 * e * n * 2048
    assert sum(terms.values()) == attention + mlp


def test_mixtral_routed_part_grows_k_fold():
    cfg = preset("mixtral-8x7b")  # K = 2 experts of f = 14336, no shared one
    s, b = 4096, 1
    terms = layer_activation_terms(cfg, s, b)
    dense = layer_activation_terms(
        dataclasses.replace(preset("mistral-7b"), sliding_window=0), s, b
    )
    ffn = 4 * 2 * s * b * 14336  # one eager SwiGLU of width f, bf16
    assert dense["MLP: gate W1 x (SiLU input)"] * 4 == ffn
    assert terms["MoE: routed experts' SwiGLU"] == 2 * ffn


def test_capacity_caps_the_routed_assignments():
    cfg = dataclasses.replace(preset("mixtral-8x7b"), capacity_factor=0.5)
    s, b = 4096, 1
    terms = layer_activation_terms(cfg, s, b)
    full = layer_activation_terms(preset("mixtral-8x7b"), s, b)
    # C = ceil(0.5 * 4096 * 2 / 8) = 512 per expert: 4096 of 8192 assignments
    routed = "MoE: routed experts' SwiGLU"
    assert terms[routed] == full[routed] / 2


def test_mla_splits_heads_over_tp_and_keeps_latents_whole():
    cfg = preset("deepseek-v3")
    one = layer_activation_terms(cfg, 4096, 1)
    eight = layer_activation_terms(cfg, 4096, 1, tp=8, sp=True)
    assert eight["attention: Q"] == one["attention: Q"] / 8
    assert eight["MLA: K/V latent c^KV"] == one["MLA: K/V latent c^KV"]
    assert (
        eight["MoE: routed experts' SwiGLU"] == one["MoE: routed experts' SwiGLU"] / 8
    )


@pytest.mark.parametrize(
    "args",
    [{"tp": 3}, {"layer": 61}, {"layer": -1}],
)
def test_bad_moe_and_mla_input_names_the_argument(args):
    with pytest.raises(ValueError, match="tp|layer"):
        layer_activation_terms(preset("deepseek-v3"), 4096, 1, **args)


def test_family_table_rows_by_hand():
    from aiinfra.memory.tables import family_layers_table

    rows = {r[0]: r for r in family_layers_table().rows}
    # DeepSeek-V3's MLA, fused, bf16, per token: 2 (2h + 2 d_c' + 2 d_c
    # + 2 H (d + d^R) + 2 H d) + 4 H = 201,216 bytes = 196.5 KiB
    assert rows["deepseek-v3"][3] == 196.5
    # Llama 3 70B's GQA 64/8, d = 128: 2 (2h + 64 d + 2 * 8 d + 64 d) + 4 * 64
    assert rows["llama-3-70b"][3] == round((2 * (2 * 8192 + 144 * 128) + 256) / 1024, 1)


@pytest.mark.parametrize(
    "name", ["deepseek-v3", "deepseek-v2", "mixtral-8x7b", "qwen1.5-moe-a2.7b"]
)
def test_bf16_expert_layer_keeps_the_fp32_router_copies(name):
    # In bf16 the router reads fp32 copies of its input (counted) and of its
    # weight (E h 4 bytes, a model state's copy, which the count leaves out).
    from aiinfra.memory.layer_terms import moe_mlp_terms
    from aiinfra.memory.measure import SavedTensorLog
    from aiinfra.models.moe.layer import MoELayer

    cfg = small(name, n_layers=1, first_dense_layers=0, n_heads=4, n_kv_heads=4)
    n = 30
    torch.manual_seed(0)
    layer = MoELayer(cfg.d_model, cfg.moe_spec()).to(torch.bfloat16).train()
    x = torch.randn(n, cfg.d_model, dtype=torch.bfloat16, requires_grad=True)
    with SavedTensorLog(exclude=[*layer.parameters(), *layer.buffers()]) as log:
        out = layer(x)  # kept: its graph holds what backward needs
        measured = log.live_bytes
    assert out.shape == x.shape
    terms = moe_mlp_terms(cfg, n, 1, 1, 1, True, 2)
    counted = sum(v for k, v in terms.items() if k != "MLP: norm input")
    assert measured == counted + 4 * cfg.n_experts * cfg.d_model
