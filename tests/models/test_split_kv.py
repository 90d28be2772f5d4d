"""Split-KV decoding against PyTorch's attention and this package's decoding path."""

import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.attention import grouped_attention
from aiinfra.models.split_kv import (
    combine,
    partial_attention,
    split_kv_attention,
    splits_to_fill,
)


def _qkv(B=2, H=8, G=2, T=1, S=97, D=16, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, D, generator=g).to(dtype)
    k = torch.randn(B, G, S, D, generator=g).to(dtype)
    v = torch.randn(B, G, S, D, generator=g).to(dtype)
    return q, k, v


@pytest.mark.parametrize("n_splits", [1, 2, 5, 97])
def test_split_kv_equals_sdpa_with_gqa(n_splits):
    q, k, v = _qkv()  # 97 cached tokens: chunks of unequal size
    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    out = split_kv_attention(q, k, v, n_splits)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_split_kv_equals_the_decoding_step_of_grouped_attention():
    q, k, v = _qkv(B=1, H=4, G=1, T=1, S=33)
    ref = grouped_attention(q, k, v, start_pos=32)  # the last token sees all 33
    torch.testing.assert_close(split_kv_attention(q, k, v, 4), ref)


def test_bf16_error_is_within_twice_sdpas():
    q, k, v = _qkv(S=257, D=32, dtype=torch.bfloat16, seed=1)
    exact = F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), enable_gqa=True
    )
    sdpa = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    ours = split_kv_attention(q, k, v, 8)
    assert (ours.double() - exact).abs().max() <= 2 * (
        sdpa.double() - exact
    ).abs().max()


def test_chunks_merge_in_any_order():
    q, k, v = _qkv(B=1, G=1, H=2, S=30)
    rows = q.reshape(1, 1, 2, 16)  # (B, G, R T, D)
    parts = [
        partial_attention(rows, ks, vs, 0.25)
        for ks, vs in zip(k.split(10, dim=2), v.split(10, dim=2), strict=True)
    ]
    torch.testing.assert_close(combine(parts), combine(parts[::-1]))


def test_splits_to_fill_one_llama_sequence_on_an_h100():
    # 1 sequence x 8 KV heads = 8 programs; 132 SMs need 17 chunks (8 x 17 = 136).
    assert splits_to_fill(1, 8, 132) == 17
    assert splits_to_fill(64, 8, 132) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_splits": 0}, "n_splits must be in"),
        ({"n_splits": 98}, "n_splits must be in"),
        ({"n_splits": 2.0}, "n_splits must be an integer"),
    ],
)
def test_bad_splits_are_rejected(kwargs, match):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=match):
        split_kv_attention(q, k, v, **kwargs)


def test_mismatched_shapes_are_rejected():
    q, k, v = _qkv(H=6, G=4)  # 4 KV heads cannot be shared by 6 query heads
    with pytest.raises(ValueError, match="G must divide H"):
        split_kv_attention(q, k, v, 2)
    with pytest.raises(ValueError, match="sms must be"):
        splits_to_fill(1, 8, 0)
