"""MHA, MQA and GQA as one module: each equals an independent implementation."""

import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.attention import GroupedQueryAttention, KVCache
from torch import nn

B, T, D_MODEL, H, D = 2, 9, 32, 4, 8


def make(n_kv_heads: int, max_seq_len: int = 16) -> GroupedQueryAttention:
    torch.manual_seed(0)
    return GroupedQueryAttention(D_MODEL, H, n_kv_heads, D, max_seq_len).double()


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


def test_heads_not_divisible_by_kv_heads_are_rejected():
    with pytest.raises(
        ValueError, match=r"n_heads \(4\) must be divisible by n_kv_heads \(3\)"
    ):
        GroupedQueryAttention(D_MODEL, 4, 3, D, 16)


def test_odd_head_dim_is_rejected():
    with pytest.raises(ValueError, match="head_dim must be even"):
        GroupedQueryAttention(D_MODEL, 4, 2, 7, 16)


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
