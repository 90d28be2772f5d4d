"""MHA, MQA and GQA as one module: each equals an independent implementation."""

import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.attention.gqa import GroupedQueryAttention, KVCache
from aiinfra.models.config import TransformerConfig
from torch import nn

B, T, D_MODEL, H, D = 2, 9, 32, 4, 8


def make(n_kv_heads: int, max_seq_len: int = 16, **fields) -> GroupedQueryAttention:
    torch.manual_seed(0)
    config = TransformerConfig(
        d_model=D_MODEL,
        n_heads=H,
        n_kv_heads=n_kv_heads,
        head_dim=D,
        max_seq_len=max_seq_len,
        **fields,
    )
    return GroupedQueryAttention(config).double()


def rotated_projections(attn: GroupedQueryAttention, x: torch.Tensor):
    """q, k, v as (B, H, T, D), with the KV heads repeated for their query groups."""
    G, R = attn.n_kv_heads, H // attn.n_kv_heads
    q = attn.rope(attn.wq(x).view(B, T, H, D).transpose(1, 2))
    k = attn.rope(attn.wk(x).view(B, T, G, D).transpose(1, 2))
    v = attn.wv(x).view(B, T, G, D).transpose(1, 2)
    return q, k.repeat_interleave(R, dim=1), v.repeat_interleave(R, dim=1)


def torch_multihead_attention(attn: GroupedQueryAttention, x: torch.Tensor):
    """PyTorch's nn.MultiheadAttention with identity in-projections, fed our
    rotated q, k, v; its out-projection takes our W_o."""
    q, k, v = rotated_projections(attn, x)
    mha = nn.MultiheadAttention(H * D, H, bias=False, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(H * D).repeat(3, 1))
        mha.out_proj.weight.copy_(attn.wo.weight)
    flat = [t.transpose(1, 2).reshape(B, T, H * D) for t in (q, k, v)]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return mha(*flat, attn_mask=future, need_weights=False)[0]


def test_gqa_with_one_kv_head_per_query_head_equals_torch_mha():
    attn = make(n_kv_heads=H)
    x = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    torch.testing.assert_close(attn(x), torch_multihead_attention(attn, x))


def test_gqa_with_one_kv_head_equals_mqa():
    # MQA (Shazeer 2019): every query head attends to the same single key/value head,
    # i.e. MHA whose K and V heads are all copies of one.
    attn = make(n_kv_heads=1)
    assert attn.wk.weight.shape == (D, D_MODEL)  # one head of keys
    x = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    torch.testing.assert_close(attn(x), torch_multihead_attention(attn, x))


def test_gqa_equals_sdpa_with_enable_gqa():
    attn = make(n_kv_heads=2)
    x = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    q = attn.rope(attn.wq(x).view(B, T, H, D).transpose(1, 2))
    k = attn.rope(attn.wk(x).view(B, T, 2, D).transpose(1, 2))
    v = attn.wv(x).view(B, T, 2, D).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(attn(x), attn.wo(o.transpose(1, 2).reshape(B, T, H * D)))


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_decoding_with_the_kv_cache_equals_the_full_causal_forward(n_kv_heads):
    attn = make(n_kv_heads)
    x = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    cache = attn.new_cache(B)
    prefill = attn(x[:, :4], cache)  # a prompt of 4 tokens, then one at a time
    steps = [attn(x[:, t : t + 1], cache) for t in range(4, T)]
    torch.testing.assert_close(torch.cat([prefill, *steps], dim=1), attn(x))
    assert cache.length == T


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_cache_holds_2_g_d_elements_per_token(n_kv_heads):
    cache = make(n_kv_heads).new_cache(batch_size=1, max_seq_len=5)
    assert cache.numel_per_token() == 2 * n_kv_heads * D  # DeepSeek-V2, Table 1


def test_gpt_style_attention_with_biases_equals_torch_mha():
    # GPT-2/3: learned positions (no RoPE) and a bias on every projection, which is
    # nn.MultiheadAttention with its in- and out-projection biases.
    attn = make(n_kv_heads=H, position="learned", norm="layernorm", bias=True)
    assert attn.rope is None
    with torch.no_grad():
        for linear in (attn.wq, attn.wk, attn.wv, attn.wo):
            linear.bias.normal_()
    mha = nn.MultiheadAttention(D_MODEL, H, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(
            torch.cat([attn.wq.weight, attn.wk.weight, attn.wv.weight])
        )
        mha.in_proj_bias.copy_(torch.cat([attn.wq.bias, attn.wk.bias, attn.wv.bias]))
        mha.out_proj.weight.copy_(attn.wo.weight)
        mha.out_proj.bias.copy_(attn.wo.bias)
    x = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    expected = mha(x, x, x, attn_mask=future, need_weights=False)[0]
    torch.testing.assert_close(attn(x), expected)


def test_qkv_bias_adds_biases_to_q_k_v_only():
    # Qwen2: biases on the query, key and value projections, none on the output.
    attn = make(n_kv_heads=2, qkv_bias=True)
    biases = [m.bias is not None for m in (attn.wq, attn.wk, attn.wv, attn.wo)]
    assert biases == [True, True, True, False]


@pytest.mark.parametrize("window", [1, 3, 5])
def test_a_sliding_window_query_equals_attention_over_its_window_alone(window):
    # RoPE scores depend only on relative positions, so with a window W the output
    # at position t is the last output of plain causal attention run on the W
    # tokens t - W + 1 .. t by themselves (Mistral, Jiang et al. 2023, Sec. 2).
    attn = make(n_kv_heads=2, sliding_window=window)
    full = make(n_kv_heads=2)
    full.load_state_dict(attn.state_dict())
    x = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    out = attn(x)
    for t in range(T):
        alone = full(x[:, max(0, t - window + 1) : t + 1])[:, -1]
        torch.testing.assert_close(out[:, t], alone)


def test_sliding_window_decoding_with_the_cache_equals_the_full_forward():
    attn = make(n_kv_heads=2, sliding_window=3)
    x = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    cache = attn.new_cache(B)
    steps = [attn(x[:, :4], cache)] + [
        attn(x[:, t : t + 1], cache) for t in range(4, T)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), attn(x))


def test_a_config_that_is_not_gqa_is_rejected():
    with pytest.raises(ValueError, match="kv_lora_rank > 0"):
        GroupedQueryAttention(TransformerConfig(kv_lora_rank=8, rope_head_dim=4))
    with pytest.raises(TypeError, match="config must be a TransformerConfig"):
        GroupedQueryAttention(32)


def test_cache_overflow_is_rejected_before_anything_is_written():
    attn = make(2)
    cache = attn.new_cache(B, max_seq_len=4)
    attn(torch.randn(B, 3, D_MODEL, dtype=torch.float64), cache)
    with pytest.raises(ValueError, match="KV cache overflow: 3 cached \\+ 2 new"):
        attn(torch.randn(B, 2, D_MODEL, dtype=torch.float64), cache)
    assert cache.length == 3


def test_sequence_longer_than_the_rope_table_is_rejected():
    with pytest.raises(ValueError, match="exceed the RoPE table"):
        make(2, max_seq_len=8)(torch.randn(B, 9, D_MODEL, dtype=torch.float64))


def test_cache_with_another_head_dim_is_rejected():
    attn = make(2)
    wrong = KVCache(B, 16, n_kv_heads=2, k_dim=D + 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="the cache holds"):
        attn(torch.randn(B, 2, D_MODEL, dtype=torch.float64), wrong)


def test_input_of_the_wrong_width_is_rejected():
    with pytest.raises(ValueError, match=r"x must be \(B, T, 32\)"):
        make(2)(torch.randn(B, T, D_MODEL + 1, dtype=torch.float64))
