"""Parameter and FLOP formulas against counting the module and FlopCounterMode."""

import pytest
from aiinfra.models.config import TransformerConfig, published_config
from aiinfra.models.flops import (
    attention_flops_per_token,
    counted_parameters,
    flops_breakdown_table,
    flops_check_table,
    matmul_parameters,
    measured_training_flops_per_token,
    parameter_count,
    training_flops_per_token,
)
from aiinfra.models.transformer import Transformer

CONFIGS = {
    "mha": TransformerConfig(),
    "gqa-tied": TransformerConfig(n_kv_heads=2, tie_embeddings=True),
    "mqa": TransformerConfig(n_kv_heads=1, n_layers=1),
    "mla": TransformerConfig(kv_lora_rank=16, q_lora_rank=24, rope_head_dim=8),
    "mla-full-rank-q": TransformerConfig(kv_lora_rank=16, rope_head_dim=8, head_dim=12),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_parameter_formula_equals_the_module(name):
    c = CONFIGS[name]
    assert parameter_count(c) == sum(p.numel() for p in Transformer(c).parameters())


# Published totals: the safetensors index of each Hugging Face repository
# ("total_size" in bytes / 2 for bf16): meta-llama/Meta-Llama-3-8B 16,060,522,496 B,
# meta-llama/Meta-Llama-3-70B 141,107,412,992 B, mistralai/Mistral-7B-v0.1
# 14,483,464,192 B (model cards: 8.03B, 70.6B, 7.24B parameters).
@pytest.mark.parametrize(
    "name, published",
    [
        ("Llama-3-8B", 8_030_261_248),
        ("Llama-3-70B", 70_553_706_496),
        ("Mistral-7B", 7_241_732_096),
    ],
)
def test_parameter_count_of_released_models(name, published):
    c = published_config(name)
    assert parameter_count(c) == counted_parameters(c) == published


@pytest.mark.parametrize(
    "name, seq_len",
    [("mha", 16), ("gqa-tied", 24), ("mqa", 8), ("mla", 16), ("mla-full-rank-q", 8)],
)
def test_flop_formula_equals_flop_counter_exactly(name, seq_len):
    # FlopCounterMode counts matmuls only, like 6N + 12LHQT; both leave out the
    # embedding gather, norms, RoPE, softmax, SiLU, residuals and the loss.
    c = CONFIGS[name]
    measured = measured_training_flops_per_token(
        Transformer(c), batch_size=2, seq_len=seq_len
    )
    assert measured == training_flops_per_token(c, seq_len)


def test_attention_term_is_12_l_h_q_t():
    c = published_config("Llama-3-8B")  # L=32, H=32, Q=128
    assert attention_flops_per_token(c, 8192) == 12 * 32 * 32 * 128 * 8192
    assert training_flops_per_token(c, 8192) == 6 * matmul_parameters(c) + (
        12 * 32 * 32 * 128 * 8192
    )


def test_6n_uses_the_matmul_weights_only():
    c = TransformerConfig()
    # Everything but the input embedding (a look-up) and the 2L + 1 norm gains.
    assert matmul_parameters(c) == parameter_count(c) - 256 * 64 - (2 * 2 + 1) * 64


def test_tables_render():
    check = flops_check_table(TransformerConfig(n_layers=1), seq_len=8)
    assert check.rows[0][1] == check.rows[0][2]  # parameters
    assert check.rows[-1][1] == check.rows[-1][2]  # FLOPs
    breakdown = flops_breakdown_table(seq_len=4096, names=("Llama-3-8B",))
    assert breakdown.rows[0][1] == breakdown.rows[0][2] == 8_030_261_248
