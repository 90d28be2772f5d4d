"""count_parameters: published totals, and numel() of transformers' own models.

Ground truths: the totals published with the checkpoints, and the models of Hugging
Face transformers (an independent implementation) built from the very same
``config.json`` fields on the meta device, which allocates no memory.
"""

import dataclasses

import pytest
import torch
from aiinfra.models.config import TransformerConfig
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import PRESETS, preset

transformers = pytest.importorskip("transformers")


def hf_model(fields: dict) -> torch.nn.Module:
    """transformers' causal LM for a config.json, built on the meta device."""
    kwargs = {k: v for k, v in fields.items() if k[0] != "_" and k != "model_type"}
    config = transformers.AutoConfig.for_model(fields["model_type"], **kwargs)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


def parts_of(model: torch.nn.Module) -> dict[str, int]:
    """numel() of a transformers model by part, classified by parameter name."""
    parts = dict.fromkeys(("embedding", "attention", "mlp", "norms", "head"), 0)
    for name, p in model.named_parameters():  # a tied matrix is listed once
        if "norm" in name or ".ln_" in name:  # *_layernorm, norm, ln_1, ln_2, ln_f
            part = "norms"
        elif "attn" in name:
            part = "attention"
        elif "mlp" in name:
            part = "mlp"
        elif name.startswith("lm_head"):
            part = "head"
        else:  # embed_tokens, wte, wpe
            part = "embedding"
        parts[part] += p.numel()
    return parts


# Totals published with the checkpoints: "total_size" of each repository's
# model.safetensors.index.json divided by 2 bytes (bf16): meta-llama/Meta-Llama-3-8B
# 16,060,522,496 B, meta-llama/Meta-Llama-3-70B 141,107,412,992 B,
# mistralai/Mistral-7B-v0.1 14,483,464,192 B, Qwen/Qwen2.5-72B-Instruct
# 145,412,407,296 B (model cards: 8.03B, 70.6B, 7.24B, 72.7B). GPT-2:
# GPT2LMHeadModel.from_pretrained("openai-community/gpt2").num_parameters().
@pytest.mark.parametrize(
    "name, published",
    [
        ("llama-3-8b", 8_030_261_248),
        ("llama-3-70b", 70_553_706_496),
        ("mistral-7b", 7_241_732_096),
        ("qwen2.5-72b", 72_706_203_648),  # q, k and v biases: 80 x 10,240
        ("gpt2", 124_439_808),
    ],
)
def test_total_equals_the_published_checkpoint(name, published):
    assert count_parameters(preset(name)).total == published


def test_gpt3_175b_is_175_billion():
    # Brown et al. 2020, Table 2.1: 175.0B parameters for n_layers 96, d_model
    # 12288, n_heads 96, n_ctx 2048 (the table rounds; the count is 174.6B).
    assert count_parameters(preset("gpt3-175b")).total == pytest.approx(175.0e9, 5e-3)


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_by_part_equals_transformers_model(name):
    # The MoE presets too: router, experts and shared experts count as "mlp".
    p = count_parameters(preset(name))
    assert dataclasses.asdict(p) == parts_of(hf_model(PRESETS[name]))


_SIZES = {"vocab_size": 101, "num_hidden_layers": 3, "max_position_embeddings": 16}
_LLAMA = {
    **_SIZES,
    "hidden_size": 48,
    "num_attention_heads": 4,
    "intermediate_size": 80,
}
_MLA = {
    **_SIZES,
    "model_type": "deepseek_v3",
    "hidden_size": 48,
    "intermediate_size": 80,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 12,
    "v_head_dim": 12,
    "first_k_dense_replace": 3,
}
_GPT2 = {
    "model_type": "gpt2",
    "vocab_size": 101,
    "n_embd": 48,
    "n_layer": 3,
    "n_head": 4,
    "n_positions": 16,
    "bos_token_id": 0,
    "eos_token_id": 0,
}
TINY = {
    "llama-gqa": {**_LLAMA, "model_type": "llama", "num_key_value_heads": 2},
    "llama-mqa-tied": {
        **_LLAMA,
        "model_type": "llama",
        "num_key_value_heads": 1,
        "tie_word_embeddings": True,
    },
    "mistral-mha": {
        **_LLAMA,
        "model_type": "mistral",
        "num_key_value_heads": 4,  # MistralConfig's default is 8, not n_heads
        "sliding_window": 8,
    },
    "qwen2-qkv-bias": {**_LLAMA, "model_type": "qwen2", "num_key_value_heads": 2},
    "deepseek-v3-mla": {**_MLA, "q_lora_rank": 24},
    "deepseek-v3-full-rank-q": {**_MLA, "q_lora_rank": None},
    "gpt2": _GPT2,
    "gpt2-untied-n-inner": {**_GPT2, "n_inner": 72, "tie_word_embeddings": False},
}


@pytest.mark.parametrize("name", TINY)
def test_tiny_config_by_part_equals_transformers_model(name):
    fields = TINY[name]
    p = count_parameters(TransformerConfig.from_hf_config(fields))
    assert dataclasses.asdict(p) == parts_of(hf_model(fields))


def test_tied_head_is_counted_once_and_learned_positions_with_the_embedding():
    gpt2 = count_parameters(preset("gpt2"))
    assert gpt2.head == 0 and gpt2.embedding == (50257 + 1024) * 768  # wte + wpe
    untied = dataclasses.replace(preset("gpt2"), tie_embeddings=False)
    assert count_parameters(untied).total - gpt2.total == 50257 * 768


@pytest.mark.parametrize("switch", ["bias", "qkv_bias"])
def test_biases_with_mla_are_refused(switch):
    config = TransformerConfig(kv_lora_rank=16, rope_head_dim=8, **{switch: True})
    with pytest.raises(ValueError, match=f"config.{switch}|kv_lora_rank"):
        count_parameters(config)
