"""Multi-head latent attention: the paper's equations, the cache, weight absorption."""

import math

import pytest
import torch
from aiinfra.models.attention.mla import LatentKVCache, MultiHeadLatentAttention
from aiinfra.models.config import TransformerConfig

B, T, D_MODEL, H, D_H, D_C, D_CQ, D_R = 2, 7, 32, 4, 8, 12, 10, 4


def config(
    q_lora_rank: int = D_CQ, max_seq_len: int = 16, **fields
) -> TransformerConfig:
    return TransformerConfig(
        d_model=D_MODEL,
        n_heads=H,
        head_dim=D_H,
        kv_lora_rank=D_C,
        q_lora_rank=q_lora_rank,
        rope_head_dim=D_R,
        max_seq_len=max_seq_len,
        **fields,
    )


def make(q_lora_rank: int = D_CQ, max_seq_len: int = 16, **fields):
    torch.manual_seed(0)
    return MultiHeadLatentAttention(config(q_lora_rank, max_seq_len, **fields)).double()


def paper_equations(m: MultiHeadLatentAttention, h: torch.Tensor) -> torch.Tensor:
    """DeepSeek-V2 Eqs. 9-19 head by head and token by token (with the RMSNorms of
    the released code on the latents)."""
    c_kv = m.kv_norm(h @ m.w_dkv.weight.T)  # Eq. 9, (B, T, d_c)
    k_c = (c_kv @ m.w_uk.weight.T).view(B, T, H, D_H)  # Eq. 10
    v_c = (c_kv @ m.w_uv.weight.T).view(B, T, H, D_H)  # Eq. 11
    c_q = m.q_norm(h @ m.w_dq.weight.T)  # Eq. 12
    q_c = (c_q @ m.w_uq.weight.T).view(B, T, H, D_H)  # Eq. 13
    q_r = m.rope((c_q @ m.w_qr.weight.T).view(B, T, H, D_R).transpose(1, 2))  # Eq. 14
    k_r = m.rope(h @ m.w_kr.weight.T)  # Eq. 15, shared by all heads, (B, T, d_R)
    out = torch.zeros(B, T, H, D_H, dtype=h.dtype)
    for b in range(B):
        for i in range(H):
            for t in range(T):
                q = torch.cat([q_c[b, t, i], q_r[b, i, t]])  # Eq. 16
                keys = torch.cat(
                    [k_c[b, : t + 1, i], k_r[b, : t + 1]], dim=-1
                )  # Eq. 17
                p = torch.softmax(keys @ q / math.sqrt(D_H + D_R), dim=0)  # Eq. 18
                out[b, t, i] = p @ v_c[b, : t + 1, i]
    return out.reshape(B, T, H * D_H) @ m.w_o.weight.T  # Eq. 19


def test_naive_mla_follows_the_papers_equations():
    m = make()
    h = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    torch.testing.assert_close(m(h), paper_equations(m, h))


@pytest.mark.parametrize("q_lora_rank", [D_CQ, 0])
def test_absorbed_decoding_equals_the_naive_path(q_lora_rank):
    m = make(q_lora_rank)
    h = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    naive, absorbed = m.new_cache(B), m.new_cache(B)
    out_naive = [m(h[:, :3], naive)] + [m(h[:, t : t + 1], naive) for t in range(3, T)]
    out_abs = [m.forward_absorbed(h[:, :3], absorbed)] + [
        m.forward_absorbed(h[:, t : t + 1], absorbed) for t in range(3, T)
    ]
    torch.testing.assert_close(torch.cat(out_abs, 1), torch.cat(out_naive, 1))
    torch.testing.assert_close(torch.cat(out_naive, 1), m(h))  # = no cache at all
    torch.testing.assert_close(absorbed.k, naive.k)  # the same latents were cached


def test_the_cache_holds_only_the_latent_and_the_rope_key():
    cache = make().new_cache(batch_size=1, max_seq_len=6)
    assert isinstance(cache, LatentKVCache)
    assert cache.numel_per_token() == D_C + D_R  # DeepSeek-V2, Table 1
    assert cache.k.shape == (1, 1, 6, D_C) and cache.v.shape == (1, 1, 6, D_R)


def test_cache_overflow_and_long_sequences_are_rejected():
    m = make(max_seq_len=8)
    cache = m.new_cache(B, max_seq_len=4)
    with pytest.raises(ValueError, match="KV cache overflow"):
        m.forward_absorbed(torch.randn(B, 5, D_MODEL, dtype=torch.float64), cache)
    with pytest.raises(ValueError, match="exceed the RoPE table"):
        m(torch.randn(B, 9, D_MODEL, dtype=torch.float64))


def test_absorbed_decoding_honours_the_sliding_window():
    m = make(sliding_window=3)
    h = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    cache = m.new_cache(B)
    out = [m.forward_absorbed(h[:, t : t + 1], cache) for t in range(T)]
    torch.testing.assert_close(torch.cat(out, 1), m(h))
    # the window matters: the last token's output differs from unwindowed MLA
    unwindowed = make()
    assert not torch.allclose(m(h)[:, -1], unwindowed(h)[:, -1])


def test_bad_configs_are_rejected():
    with pytest.raises(ValueError, match="MLA needs kv_lora_rank > 0"):
        MultiHeadLatentAttention(TransformerConfig())
    with pytest.raises(ValueError, match="MLA with biases"):
        MultiHeadLatentAttention(config(qkv_bias=True))
    with pytest.raises(TypeError, match="config must be a TransformerConfig"):
        MultiHeadLatentAttention({"kv_lora_rank": D_C})
    with pytest.raises(ValueError, match=r"x must be \(B, T, 32\)"):
        make()(torch.randn(B, T, 31, dtype=torch.float64))
