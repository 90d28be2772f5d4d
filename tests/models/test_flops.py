"""FLOP formulas against FlopCounterMode, on this package's models and transformers'."""

import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.config import TransformerConfig
from aiinfra.models.flops import (
    attention_flops_per_token,
    counted_parameters,
    flops_breakdown_table,
    flops_check_table,
    matmul_parameters,
    measured_training_flops_per_token,
    training_flops_per_token,
)
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.models.transformer import Transformer
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

CONFIGS = {
    "mha": TransformerConfig(),
    "gqa-tied": TransformerConfig(n_kv_heads=2, tie_embeddings=True),
    "mqa": TransformerConfig(n_kv_heads=1, n_layers=1),
    "mla": TransformerConfig(kv_lora_rank=16, q_lora_rank=24, rope_head_dim=8),
    "mla-full-rank-q": TransformerConfig(kv_lora_rank=16, rope_head_dim=8, head_dim=12),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_parameter_count_equals_the_module(name):
    c = CONFIGS[name]
    model = Transformer(c)
    assert count_parameters(c).total == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", CONFIGS)
def test_6n_counts_the_weights_of_every_linear_layer(name):
    # Every matmul weight is an nn.Linear's; a tied head is a Linear too.
    model = Transformer(CONFIGS[name])
    linear = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    assert matmul_parameters(CONFIGS[name]) == sum(w.numel() for w in linear)


# Published totals: "total_size" of each safetensors index / 2 bytes (bf16); see
# tests/models/test_params.py. This package's Transformer, built on the meta
# device, holds them too.
@pytest.mark.parametrize(
    "name, published",
    [
        ("llama-3-8b", 8_030_261_248),
        ("llama-3-70b", 70_553_706_496),
        ("mistral-7b", 7_241_732_096),
    ],
)
def test_parameter_count_of_released_models(name, published):
    c = preset(name)
    assert count_parameters(c).total == counted_parameters(c) == published


@pytest.mark.parametrize(
    "name, seq_len",
    [("mha", 16), ("gqa-tied", 24), ("mqa", 8), ("mla", 16), ("mla-full-rank-q", 8)],
)
def test_flop_formula_equals_flop_counter_exactly(name, seq_len):
    # FlopCounterMode counts matmuls only, like 6 Psi + 12 L H d T; both leave out the
    # embedding gather, norms, RoPE, softmax, SiLU, residuals and the loss.
    c = CONFIGS[name]
    measured = measured_training_flops_per_token(
        Transformer(c), batch_size=2, seq_len=seq_len
    )
    assert measured == training_flops_per_token(c, seq_len)


_GPT2 = {"model_type": "gpt2", "vocab_size": 101, "n_embd": 32, "n_layer": 2}
_GPT2 |= {"n_head": 4, "n_positions": 16, "bos_token_id": 0, "eos_token_id": 0}
_SMALL = {"vocab_size": 101, "hidden_size": 32, "intermediate_size": 48}
_SMALL |= {"num_hidden_layers": 2, "num_attention_heads": 4}
HF_CONFIGS = {
    "gpt2-tied": _GPT2,
    "gpt2-untied-n-inner": {**_GPT2, "n_inner": 48, "tie_word_embeddings": False},
    "qwen2-qkv-bias": {**_SMALL, "model_type": "qwen2", "num_key_value_heads": 2},
    "deepseek-v3-dense": {
        **_SMALL,
        "model_type": "deepseek_v3",
        "num_key_value_heads": 4,
        "kv_lora_rank": 16,
        "q_lora_rank": 24,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "first_k_dense_replace": 2,  # every layer dense
    },
}


@pytest.mark.parametrize("name", HF_CONFIGS)
def test_flop_formula_equals_flop_counter_on_transformers_models(name):
    # An independent implementation of both families (GELU + LayerNorm + biases +
    # learned positions; SwiGLU + RMSNorm + q/k/v biases; MLA): eager attention
    # computes the full T x T scores, as the formula counts them.
    transformers = pytest.importorskip("transformers")
    fields = HF_CONFIGS[name]
    kwargs = {k: v for k, v in fields.items() if k != "model_type"}
    hf_config = transformers.AutoConfig.for_model(fields["model_type"], **kwargs)
    model = transformers.AutoModelForCausalLM.from_config(
        hf_config, attn_implementation="eager"
    )
    B, T = 2, 8
    tokens = torch.randint(101, (B, T), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        logits = model(tokens).logits  # (B, T, V)
        F.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
    config = TransformerConfig.from_hf_config(fields)
    assert counter.get_total_flops() / (B * T) == training_flops_per_token(config, T)


def test_attention_term_is_12_l_h_q_t():
    c = preset("llama-3-8b")  # L=32, H=32, Q=128
    assert attention_flops_per_token(c, 8192) == 12 * 32 * 32 * 128 * 8192


def test_tables_render():
    check = flops_check_table(TransformerConfig(n_layers=1), seq_len=8)
    assert check.rows[0][1] == check.rows[0][2]  # parameters
    assert check.rows[-1][1] == check.rows[-1][2]  # FLOPs
    breakdown = flops_breakdown_table(seq_len=4096, names=("llama-3-8b",))
    assert breakdown.rows[0][1] == breakdown.rows[0][2] == 8_030_261_248
