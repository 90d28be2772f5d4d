"""KV cache per token: DeepSeek-V2 Table 1 against caches filled by real layers.

:func:`kv_bytes_per_token`, the package's one count of a cache's bytes, is checked
against the vLLM paper's 800 KiB for OPT-13B and against the bytes that the cache
tensors of a real ``transformers`` model hold after a prefill.
"""

import pytest
import torch
from aiinfra.models.attention.kv_cache_size import (
    ATTENTION_MODELS,
    attention_kind,
    elements_per_token,
    equivalent_gqa_groups,
    kv_bytes_per_token,
    kv_cache_figure,
    kv_cache_table,
    measured_elements_per_token,
    mha_to_cache_ratio,
)
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import PRESETS, preset


@pytest.mark.parametrize("name", PRESETS)
def test_formula_equals_what_real_caches_hold(name):
    c = preset(name)
    assert measured_elements_per_token(c) * c.n_layers == elements_per_token(c)


def test_deepseek_v2_figures():
    # DeepSeek-V2 (Sec. 2.1.4, Table 1): d_c = 4 d_h = 512, d_h^R = d_h / 2 = 64;
    # the MLA cache equals that of GQA with 2.25 groups; MHA would hold
    # 2 n_h d_h = 32768 elements per token and layer.
    c = preset("deepseek-v2")
    assert elements_per_token(c) == (512 + 64) * 60
    assert equivalent_gqa_groups(c) == 2.25
    assert mha_to_cache_ratio("deepseek-v2") == 2 * 128 * 128 / 576


def test_llama3_8b_caches_128_kib_per_token_in_bf16():
    assert elements_per_token(preset("llama-3-8b")) * 2 == 128 * 1024
    assert kv_bytes_per_token(preset("llama-3-8b")) == 128 * 1024


def test_opt_13b_caches_800_kib_per_token_in_fp16():
    # Kwon et al. 2023 (vLLM), Sec. 3: OPT-13B, 40 layers, hidden 5120 (40 heads of
    # 128), fp16: 2 x 5120 x 40 x 2 bytes = 800 KB per token.
    opt_13b = TransformerConfig(50272, 5120, 40, 40, d_ff=20480, max_seq_len=2048)
    assert kv_bytes_per_token(opt_13b, 2) == 800 * 1024


@pytest.mark.parametrize(
    ("kv_heads", "dtype"),
    [(4, torch.float32), (2, torch.bfloat16), (1, torch.float16)],  # MHA, GQA, MQA
)
def test_bytes_per_token_equal_the_bytes_of_a_transformers_llamas_cache(
    kv_heads, dtype
):
    transformers = pytest.importorskip("transformers")
    hf = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        head_dim=8,
        max_position_embeddings=16,
    )
    model = transformers.LlamaForCausalLM(hf).to(dtype).eval()
    T = 5
    with torch.no_grad():
        out = model(torch.randint(0, 64, (1, T)), use_cache=True)
    cache = out.past_key_values
    held = sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values))
    ours = TransformerConfig.from_hf_config(hf.to_dict())
    element = torch.finfo(dtype).bits // 8
    assert kv_bytes_per_token(ours, element) * T == held


@pytest.mark.parametrize(
    "kwargs, kind, per_layer",
    [
        ({}, "MHA", 2 * 4 * 16),
        ({"n_kv_heads": 2}, "GQA", 2 * 2 * 16),
        ({"n_kv_heads": 1}, "MQA", 2 * 16),
        ({"kv_lora_rank": 24, "rope_head_dim": 8}, "MLA", 24 + 8),
    ],
)
def test_each_kind_of_attention_is_measured_as_the_formula(kwargs, kind, per_layer):
    c = TransformerConfig(**kwargs)  # 4 heads of 16
    assert attention_kind(c) == kind
    assert elements_per_token(c) == per_layer * c.n_layers
    assert measured_elements_per_token(c, n_layers=3, seq_len=5) == per_layer


def test_table_lists_every_model_with_matching_columns():
    table = kv_cache_table()
    assert [r[0] for r in table.rows] == list(ATTENTION_MODELS)
    for row in table.rows:
        assert row[3] == row[4]  # per layer: formula == measured
    assert kv_cache_table(names=("mistral-7b",), measure=False).rows[0][4] == ""


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: kv_cache_table(names=("llama-9",), measure=False), "unknown model"),
        (lambda: kv_cache_table(context=0, measure=False), "context"),
        (lambda: measured_elements_per_token(TransformerConfig(), n_layers=0), "n_lay"),
        (lambda: measured_elements_per_token(TransformerConfig(), seq_len=-1), "seq"),
        (lambda: kv_cache_figure(bytes_per_element=0), "bytes_per_element"),
        (lambda: kv_cache_figure(names=("llama-9",)), "unknown model"),
        (lambda: kv_bytes_per_token(TransformerConfig(), 0), "bytes_per_element"),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_figure_draws_the_published_bytes_per_token():
    # Llama 3 8B: 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 128 KiB;
    # DeepSeek-V2: (512 + 64) x 60 layers x 2 bytes = 67.5 KiB. MHA with the same
    # query heads: 2 x 32 x 128 x 32 x 2 bytes = 512 KiB and 2 x 128 x 128 x 60 x 2
    # bytes = 3840 KiB.
    ax = kv_cache_figure(names=("llama-3-8b", "deepseek-v2")).axes[0]
    mha, cached = ax.containers
    assert [b.get_width() for b in cached] == [128, 67.5]
    assert [b.get_width() for b in mha] == [512, 3840]
