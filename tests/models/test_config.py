"""TransformerConfig: config.json fields map onto it; bad fields are named."""

import json

import pytest
from aiinfra.models.config import (
    PUBLISHED_CONFIGS,
    TransformerConfig,
    published_config,
)

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
    c = published_config("DeepSeek-V2")
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


def test_every_published_config_parses_and_unknown_names_are_rejected():
    for name in PUBLISHED_CONFIGS:
        assert published_config(name).n_layers > 0
    with pytest.raises(ValueError, match="unknown model 'GPT-5'"):
        published_config("GPT-5")
