"""MoE models through the dense counters: published totals, transformers' numel().

Ground truths: the totals and activated counts their authors published, and the
models of Hugging Face transformers built from the same ``config.json`` fields on the
meta device (``tests/models/test_params.py`` compares every preset by part; here
tiny configs of each family, and the activated count). FLOPs: PyTorch's
``FlopCounterMode`` over a training step of this package's MoE Transformer.
"""

import pytest
import torch
from aiinfra.models.config import TransformerConfig
from aiinfra.models.flops import (
    measured_training_flops_per_token,
    training_flops_per_token,
)
from aiinfra.models.params import (
    count_parameters,
    mtp_module_parameters,
    routed_expert_parameters,
)
from aiinfra.models.presets import PRESETS, preset
from aiinfra.models.transformer import Transformer

transformers = pytest.importorskip("transformers")
from transformers.modeling_layers import MtpModel  # noqa: E402

from tests.models.test_params import hf_model  # noqa: E402


def hf_activated(model: torch.nn.Module, top_k: int) -> int:
    """numel() less the idle routed experts: ``(E - K) / E`` of each expert bank.

    transformers stores each MoE layer's routed experts as one bank of stacked
    ``(E, ...)`` tensors (``mlp.experts``); the shared experts are elsewhere.
    """
    total = sum(p.numel() for p in model.parameters())
    for name, module in model.named_modules():
        if name.endswith(".experts"):
            n_experts = module.gate_up_proj.shape[0]
            bank = sum(p.numel() for p in module.parameters())
            total -= bank * (n_experts - top_k) // n_experts
    return total


B = 1e9
# Published counts, in billions, to the digits published:
# - Mixtral 8x7B: "46.7B total parameters but only uses 12.9B parameters per token"
#   (Mistral AI, "Mixtral of experts", 11 Dec 2023); the paper (Jiang et al. 2024,
#   Sec. 2) rounds to 47B and 13B.
# - Qwen1.5-MoE-A2.7B: 14.3B parameters, 2.7B activated (Qwen team, "Qwen1.5-MoE:
#   Matching 7B model performance with 1/3 activated parameters", 28 Mar 2024).
# - DeepSeek-V2: 236B total, 21B activated per token (DeepSeek-AI 2024, abstract).
# - DeepSeek-V3: 671B total, 37B activated per token (DeepSeek-AI 2024, abstract).
PUBLISHED = {
    "mixtral-8x7b": (46.7, 12.9, 1),
    "qwen1.5-moe-a2.7b": (14.3, 2.7, 1),
    "deepseek-v2": (236, 21, 0),
    "deepseek-v3": (671, 37, 0),
}


@pytest.mark.parametrize("name", PUBLISHED)
def test_totals_equal_the_published_ones(name):
    total, _, digits = PUBLISHED[name]
    assert round(count_parameters(preset(name)).total / B, digits) == total


@pytest.mark.parametrize("name", ["mixtral-8x7b", "qwen1.5-moe-a2.7b", "deepseek-v2"])
def test_activated_with_the_embedding_equals_the_published_count(name):
    # Mistral and Qwen count every parameter but the idle experts, embedding
    # included (without it: 12.7B and 2.4B, which they do not publish).
    _, active, digits = PUBLISHED[name]
    a = count_parameters(preset(name), activated=True)
    assert round(a.total / B, digits) == active


def test_mixtral_rounds_to_the_papers_47b_and_13b():
    c = preset("mixtral-8x7b")
    assert round(count_parameters(c).total / B) == 47
    assert round(count_parameters(c, activated=True).total / B) == 13


def test_deepseek_activated_counts_leave_out_the_input_embedding():
    # DeepSeek's 37B is the count without the input embedding (a table look-up,
    # no matmul), 36.6B; with it the count is 37.6B, which does not round to 37.
    # DeepSeek-V2's 21B holds either way (20.9B without, 21.4B with).
    for name in ("deepseek-v2", "deepseek-v3"):
        a = count_parameters(preset(name), activated=True)
        assert round((a.total - a.embedding) / B) == PUBLISHED[name][1]
    v3 = count_parameters(preset("deepseek-v3"), activated=True)
    assert round(v3.total / B) == 38


def test_deepseek_v3_checkpoint_adds_its_mtp_module_to_the_671b():
    # The model card: "685B, which includes 671B of the Main Model weights and 14B
    # of the Multi-Token Prediction (MTP) Module weights"; the paper's 671B is the
    # main model. The module as stored (layer 61: a MoE block, the 2h x h
    # projection, three norms and copies of the embedding and head) counts 13.46B,
    # so main model and module hold 684.49B: 0.5B short of the card's 685B (whose
    # 14B is 685 - 671), a gap this count does not explain (the FP8 checkpoint
    # also stores per-block scale tensors, which are not modelled here).
    c = preset("deepseek-v3")
    main, mtp = count_parameters(c).total, mtp_module_parameters(c)
    assert round(main / B) == 671 and round(mtp / B, 2) == 13.46
    assert round((main + mtp) / B, 2) == 684.49


def test_mtp_module_equals_transformers_mtp_layer_plus_stored_copies():
    fields = PRESETS["deepseek-v3"]
    main = hf_model(fields)
    with torch.device("meta"):
        mtp = MtpModel(main, 1)  # embedding and head shared with the main model
    own = sum(p.numel() for p in mtp.parameters())  # the shared ones listed once
    assert mtp_module_parameters(preset("deepseek-v3")) == own


_TINY = {"vocab_size": 101, "hidden_size": 48, "num_attention_heads": 4}
_SHAPE = {**_TINY, "num_hidden_layers": 3, "intermediate_size": 80}
_MLA = {
    **_SHAPE,
    "num_key_value_heads": 4,
    "kv_lora_rank": 16,
    "q_lora_rank": 24,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 12,
    "v_head_dim": 12,
    "moe_intermediate_size": 20,
    "num_experts_per_tok": 2,
    "n_shared_experts": 2,
    "first_k_dense_replace": 1,
    "n_group": 4,
    "topk_group": 2,
}
TINY = {
    "mixtral": {
        **_SHAPE,
        "model_type": "mixtral",
        "num_key_value_heads": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "qwen2-moe-first-dense": {
        **_SHAPE,
        "model_type": "qwen2_moe",
        "num_key_value_heads": 2,
        "num_experts": 6,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 24,
        "shared_expert_intermediate_size": 40,
        "mlp_only_layers": [0],
    },
    "deepseek-v2": {
        **_MLA,
        "model_type": "deepseek_v2",
        "n_routed_experts": 8,
        "topk_method": "group_limited_greedy",
    },
    "deepseek-v3": {**_MLA, "model_type": "deepseek_v3", "n_routed_experts": 8},
}


@pytest.mark.parametrize("name", TINY)
def test_tiny_totals_and_activated_equal_transformers_models(name):
    fields = TINY[name]
    c = TransformerConfig.from_hf_config(fields)
    model = hf_model(fields)
    assert count_parameters(c).total == sum(p.numel() for p in model.parameters())
    activated = count_parameters(c, activated=True).total
    assert activated == hf_activated(model, c.top_k)
    banks = [m for n, m in model.named_modules() if n.endswith(".experts")]
    routed = sum(p.numel() for bank in banks for p in bank.parameters())
    assert routed_expert_parameters(c) == routed


# The papers' tables: Mixtral (Jiang et al. 2024, Table 1: 8 experts, top-2);
# Qwen1.5-MoE (Qwen blog: 60 routed experts, 4 activated, and 4 shared experts,
# which config.json fuses into one MLP as wide as 4 routed ones); DeepSeek-V2
# (Sec. 3.1: 2 shared and 160 routed experts of 1536, 6 activated, at most 3
# devices, first layer dense); DeepSeek-V3 (Sec. 4.2: 1 shared and 256 routed
# experts of 2048, 8 activated, at most 4 nodes, first three layers dense; Sec.
# 2.1.2: sigmoid gating). The 8 groups and the routed scales are config.json's.
SPECS = {
    "mixtral-8x7b": ((8, 2, 14336), (0, 0), ("softmax", 1, 1, 1.0), 0),
    "qwen1.5-moe-a2.7b": ((60, 4, 1408), (1, 4 * 1408), ("softmax", 1, 1, 1.0), 0),
    "deepseek-v2": ((160, 6, 1536), (2, 3072), ("softmax", 8, 3, 16.0), 1),
    "deepseek-v3": ((256, 8, 2048), (1, 2048), ("sigmoid", 8, 4, 2.5), 3),
}


@pytest.mark.parametrize("name", SPECS)
def test_presets_carry_the_papers_expert_shapes(name):
    c = preset(name)
    s = c.moe_spec()
    experts, shared, routing, dense = SPECS[name]
    assert (s.n_experts, s.top_k, s.d_expert) == experts
    assert (s.n_shared, s.shared_width) == shared
    assert (s.router, s.n_groups, s.topk_groups, s.routed_scale) == routing
    assert c.first_dense_layers == dense


def test_one_training_step_counts_6_activated_psi_plus_attention():
    # FlopCounterMode counts the matmuls actually run: the router, the shared
    # expert and, per token, its K experts of the E.
    c = TransformerConfig.from_hf_config(TINY["qwen2-moe-first-dense"])
    torch.manual_seed(0)
    model = Transformer(c)
    measured = measured_training_flops_per_token(model, batch_size=2, seq_len=8)
    assert measured == training_flops_per_token(c, 8)


def test_the_transformer_builds_experts_where_the_config_says():
    c = TransformerConfig.from_hf_config(TINY["deepseek-v3"])
    with torch.device("meta"):
        model = Transformer(c)
    assert [c.is_moe_layer(i) for i in range(3)] == [False, True, True]
    assert type(model.blocks[0].mlp).__name__ == "SwiGLU"
    assert type(model.blocks[1].mlp).__name__ == "MoELayer"
    assert sum(p.numel() for p in model.parameters()) == count_parameters(c).total


@pytest.mark.parametrize(
    "change, message",
    [
        ({"decoder_sparse_step": 2}, "'decoder_sparse_step' is 2"),
        ({"mlp_only_layers": [1]}, "'mlp_only_layers' is \\[1\\]"),
        ({"num_experts_per_tok": None}, "'num_experts_per_tok' is missing"),
        ({"num_experts_per_tok": 7}, "top_k \\(7\\) must be <= n_experts \\(6\\)"),
        ({"model_type": "qwen3_moe"}, "'num_experts' announces experts"),
    ],
)
def test_qwen_moe_configs_not_modelled_are_refused_by_name(change, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig.from_hf_config({**TINY["qwen2-moe-first-dense"], **change})


@pytest.mark.parametrize(
    "change, message",
    [
        ({"moe_layer_freq": 2}, "'moe_layer_freq' is 2"),
        ({"scoring_func": "tanh"}, "'scoring_func' is 'tanh'"),
        ({"topk_method": "random"}, "'topk_method' is 'random'"),
        ({"n_group": None}, "'n_group' is missing"),
        ({"n_group": 3}, "n_experts \\(8\\) must be divisible by n_groups \\(3\\)"),
    ],
)
def test_deepseek_configs_not_modelled_are_refused_by_name(change, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig.from_hf_config({**TINY["deepseek-v3"], **change})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"top_k": 2}, "top_k is 2 but n_experts is 0"),
        ({"n_experts": 4, "d_expert": 8}, "top_k must be an int >= 1"),
        ({"n_experts": 4, "top_k": 2, "d_expert": 8, "router": "relu"}, "router"),
        ({"n_experts": 4, "top_k": 2, "d_expert": 8, "first_dense_layers": 3}, "first"),
        ({"n_experts": 4, "top_k": 2, "d_expert": 8, "mlp": "gelu"}, "swiglu"),
        ({"n_experts": -1}, "n_experts must be an int >= 0"),
    ],
)
def test_bad_moe_fields_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**kwargs)


def test_dense_configs_are_unchanged_and_is_moe_layer_checks_its_index():
    c = TransformerConfig()
    assert c.moe_spec() is None and not c.is_moe and c.n_moe_layers == 0
    assert not c.is_moe_layer(1)
    with pytest.raises(ValueError, match="i must be an int in \\[0, 1\\]"):
        c.is_moe_layer(2)


def test_deepseek_v3_fp8_weights_count_each_of_transformers_linears():
    # DeepSeek-V3 (Sec. 3.3.2) is released in FP8: every linear layer of the
    # decoder in e4m3 with one fp32 scale per 128 x 128 block (ceil per matrix),
    # the routers' gates, the embedding, the head and the norms in bf16.
    import math

    from aiinfra.book.models.moe_models import bf16_weights_gb, fp8_weights_gb

    model = hf_model(PRESETS["deepseek-v3"])
    total = 0
    for name, p in model.named_parameters():
        if name.startswith("model.layers.") and p.dim() >= 2 and ".gate." not in name:
            n, m = p.shape[-2:]  # the experts are stacked: (E, n, m)
            scales = p[..., 0, 0].numel() * math.ceil(n / 128) * math.ceil(m / 128)
            total += p.numel() + 4 * scales
        else:
            total += 2 * p.numel()
    assert fp8_weights_gb() == pytest.approx(total / 1e9, rel=1e-4)
    assert fp8_weights_gb() < 0.51 * bf16_weights_gb()  # about 0.7 TB, not 1.3
