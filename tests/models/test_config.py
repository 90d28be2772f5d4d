"""TransformerConfig: config.json fields map onto it; bad fields are named."""

import json

import pytest
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import DENSE_PRESETS, PRESETS, is_moe, preset

# Fields of meta-llama/Meta-Llama-3-8B/config.json on the Hugging Face Hub, plus keys
# the config ignores.
LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}


def test_from_hf_config_maps_every_llama3_field():
    c = TransformerConfig.from_hf_config(LLAMA3_8B)
    assert (c.d_model, c.n_layers, c.n_heads, c.n_kv_heads) == (4096, 32, 32, 8)
    assert (c.head_dim, c.d_ff, c.vocab_size, c.max_seq_len) == (
        128,
        14336,
        128256,
        8192,
    )
    assert (c.rope_theta, c.norm_eps, c.tie_embeddings) == (500000.0, 1e-5, False)
    assert not c.is_mla


def test_from_hf_config_reads_a_json_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA3_8B))
    assert TransformerConfig.from_hf_config(path) == TransformerConfig.from_hf_config(
        LLAMA3_8B
    )
    assert TransformerConfig.from_hf_config(str(path)).n_kv_heads == 8


def test_from_hf_config_reads_deepseek_mla_fields():
    c = preset("deepseek-v2")
    assert c.is_mla
    assert (c.kv_lora_rank, c.q_lora_rank, c.rope_head_dim, c.head_dim) == (
        512,
        1536,
        64,
        128,
    )


def test_optional_fields_default_and_null_means_absent():
    minimal = {
        k: LLAMA3_8B[k]
        for k in (
            "hidden_size",
            "num_attention_heads",
            "num_hidden_layers",
            "vocab_size",
            "intermediate_size",
        )
    }
    c = TransformerConfig.from_hf_config({**minimal, "q_lora_rank": None})
    assert c.n_kv_heads == c.n_heads == 32 and c.head_dim == 128
    assert not c.tie_embeddings and c.q_lora_rank == 0


@pytest.mark.parametrize(
    "field",
    [
        "hidden_size",
        "num_attention_heads",
        "num_hidden_layers",
        "vocab_size",
        "intermediate_size",
    ],
)
def test_missing_required_field_is_named(field):
    config = {k: v for k, v in LLAMA3_8B.items() if k != field}
    with pytest.raises(ValueError, match=f"'{field}' is missing"):
        TransformerConfig.from_hf_config(config)


@pytest.mark.parametrize(
    "field, value",
    [
        ("hidden_size", "4096"),
        ("num_attention_heads", 32.0),
        ("num_hidden_layers", 0),
        ("vocab_size", True),
        ("rope_theta", -1.0),
        ("rms_norm_eps", "1e-5"),
        ("tie_word_embeddings", "no"),
        ("num_key_value_heads", -8),
    ],
)
def test_malformed_field_is_named(field, value):
    with pytest.raises(ValueError, match=f"'{field}'"):
        TransformerConfig.from_hf_config({**LLAMA3_8B, field: value})


def test_heads_not_divisible_by_kv_heads_is_rejected():
    with pytest.raises(
        ValueError, match=r"n_heads \(32\) must be divisible by n_kv_heads"
    ):
        TransformerConfig.from_hf_config({**LLAMA3_8B, "num_key_value_heads": 5})


def test_width_not_divisible_by_heads_needs_head_dim():
    with pytest.raises(ValueError, match="d_model .* divisible by n_heads"):
        TransformerConfig(d_model=64, n_heads=5)
    assert TransformerConfig(d_model=64, n_heads=5, head_dim=16).head_dim == 16


def test_odd_rope_width_is_rejected():
    with pytest.raises(ValueError, match="head_dim must be even"):
        TransformerConfig(d_model=60, n_heads=4)  # head_dim 15
    with pytest.raises(ValueError, match="rope_head_dim must be even"):
        TransformerConfig(kv_lora_rank=16, rope_head_dim=7)


def test_mla_fields_must_be_complete_and_consistent():
    mla = {**LLAMA3_8B, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
    with pytest.raises(ValueError, match="'qk_nope_head_dim' is missing"):
        TransformerConfig.from_hf_config(mla)
    with pytest.raises(ValueError, match="'v_head_dim'"):
        TransformerConfig.from_hf_config(
            {**mla, "qk_nope_head_dim": 128, "v_head_dim": 96}
        )


def test_a_config_that_is_not_an_object_is_rejected():
    with pytest.raises(ValueError, match="JSON object"):
        TransformerConfig.from_hf_config([1, 2])  # type: ignore[arg-type]


def test_preset_lookup_ignores_case_and_lists_the_presets_on_a_miss():
    assert preset("Llama-3-8B") == preset("llama-3-8b")
    with pytest.raises(
        ValueError, match=r"unknown model name 'GPT-5'; the names are .*gpt2"
    ):
        preset("GPT-5")
    with pytest.raises(TypeError, match="name must be a str"):
        preset(8)  # type: ignore[arg-type]


def test_presets_carry_each_family_s_layer_choices():
    # What the checkpoints hold: Qwen2.5's q/k/v biases (model cards: "Attention
    # QKV bias"), Mistral 7B's 4096-token window (Jiang et al. 2023, Table 1),
    # GPT-2/3's LayerNorm, biases, GELU, learned positions and tied head.
    assert preset("qwen2.5-72b").qkv_bias and not preset("llama-3-70b").qkv_bias
    assert preset("mistral-7b").sliding_window == 4096
    assert preset("llama-3-8b").sliding_window == 0
    gpt3 = preset("gpt3-175b")
    assert (gpt3.norm, gpt3.mlp, gpt3.position, gpt3.bias) == (
        "layernorm",
        "gelu",
        "learned",
        True,
    )
    assert (gpt3.d_model, gpt3.n_layers, gpt3.n_heads, gpt3.head_dim) == (
        12288,
        96,
        96,
        128,
    )
    assert gpt3.max_seq_len == 2048 and gpt3.d_ff == 4 * 12288 and gpt3.tie_embeddings


def test_only_the_expert_presets_are_mixture_of_experts():
    moe = ["deepseek-v2", "deepseek-v3", "mixtral-8x7b", "qwen1.5-moe-a2.7b"]
    assert [n for n in PRESETS if is_moe(PRESETS[n])] == moe
    assert [n for n in PRESETS if preset(n).is_moe] == moe
    assert "deepseek-v3" not in DENSE_PRESETS and "gpt2" in DENSE_PRESETS
    assert not is_moe({"num_experts": None, "num_local_experts": 0})
    assert is_moe({"num_local_experts": 8})  # Mixtral 8x7B


# transformers 5 writes the RoPE base into rope_parameters; transformers 4 kept it at
# the top level. Both layouts must give Llama 3's 500000, never the default 10000.
def test_rope_theta_is_read_from_both_layouts():
    old = {k: v for k, v in LLAMA3_8B.items() if k != "rope_theta"}
    new = {**old, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}
    assert TransformerConfig.from_hf_config(new).rope_theta == 500000.0
    assert TransformerConfig.from_hf_config(LLAMA3_8B).rope_theta == 500000.0
    both = {**new, "rope_theta": 1e4}
    with pytest.raises(ValueError, match="disagree"):
        TransformerConfig.from_hf_config(both)


@pytest.mark.parametrize(
    "key, rope",
    [
        ("rope_scaling", {"rope_type": "llama3", "factor": 8.0}),  # Llama 3.1
        ("rope_scaling", {"type": "yarn", "factor": 40, "mscale": 1.0}),  # DeepSeek
        ("rope_parameters", {"rope_type": "linear", "rope_theta": 1e4}),
        ("rope_parameters", "default"),
    ],
)
def test_scaled_rope_is_refused_not_ignored(key, rope):
    with pytest.raises(ValueError, match=key):
        TransformerConfig.from_hf_config({**LLAMA3_8B, key: rope})


@pytest.mark.parametrize(
    "change, message",
    [
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"attention_bias": True}, "attention_bias"),
        ({"mlp_bias": True}, "mlp_bias"),
        ({"model_type": "qwen2", "use_sliding_window": True}, "use_sliding_window"),
    ],
)
def test_what_is_not_modelled_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig.from_hf_config({**LLAMA3_8B, **change})


def test_qwen2_has_qkv_biases_and_mistral_a_sliding_window():
    qwen = TransformerConfig.from_hf_config(
        {**LLAMA3_8B, "model_type": "qwen2", "sliding_window": 4096}
    )
    assert qwen.qkv_bias and not qwen.bias and qwen.sliding_window == 0
    mistral = TransformerConfig.from_hf_config(
        {**LLAMA3_8B, "model_type": "mistral", "sliding_window": 4096}
    )
    assert mistral.sliding_window == 4096 and not mistral.qkv_bias


# Fields of openai-community/gpt2/config.json on the Hugging Face Hub.
GPT2 = {
    "activation_function": "gelu_new",
    "model_type": "gpt2",
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "layer_norm_epsilon": 1e-05,
    "vocab_size": 50257,
}


def test_gpt2_family_is_read_with_its_layer_choices():
    c = TransformerConfig.from_hf_config(GPT2)
    assert (c.d_model, c.n_layers, c.n_heads, c.d_ff, c.max_seq_len) == (
        768,
        12,
        12,
        3072,
        1024,
    )
    assert (c.norm, c.mlp, c.position, c.bias, c.tie_embeddings) == (
        "layernorm",
        "gelu",
        "learned",
        True,
        True,
    )
    with pytest.raises(ValueError, match="activation_function"):
        TransformerConfig.from_hf_config({**GPT2, "activation_function": "relu"})


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("norm", "batchnorm", "norm must be one of"),
        ("mlp", "relu", "mlp must be one of"),
        ("position", "alibi", "position must be one of"),
        ("sliding_window", -1, "sliding_window must be an int >= 0"),
        ("qkv_bias", 1, "qkv_bias must be a bool"),
    ],
)
def test_bad_switches_are_named(field, value, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{field: value})


def test_mla_ignores_num_key_value_heads():
    # transformers' DeepseekV3Config writes num_key_value_heads = 128 even for a
    # 4-head model; MLA has no KV heads to group, so the field is not read.
    mla = {
        **LLAMA3_8B,
        "num_attention_heads": 4,
        "num_key_value_heads": 128,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 16,
        "qk_nope_head_dim": 32,
    }
    c = TransformerConfig.from_hf_config(mla)
    assert c.is_mla and c.n_heads == 4 and c.n_kv_heads == 4
