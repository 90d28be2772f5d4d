"""RMSNorm, RoPE, SwiGLU and the GELU MLP against PyTorch and their equations."""

import math

import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.layers import GeluMLP, RMSNorm, RotaryEmbedding, SwiGLU


def test_rmsnorm_matches_torch_rmsnorm():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16)
    ours, theirs = RMSNorm(16, eps=1e-5), torch.nn.RMSNorm(16, eps=1e-5)
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    torch.testing.assert_close(ours(x), theirs(x))


def test_rope_equals_multiplication_by_complex_phases():
    # RoFormer Eq. 34 in complex form: pair (x_2i, x_2i+1) is z_i, rotated by
    # exp(i m theta_i).
    torch.manual_seed(0)
    T, D = 7, 8
    x = torch.randn(3, T, D, dtype=torch.float64)
    rope = RotaryEmbedding(D, max_seq_len=16, theta=10000.0).double()
    theta = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    m = torch.arange(2, 2 + T, dtype=torch.float64)
    phase = torch.polar(
        torch.ones(T, D // 2, dtype=torch.float64), torch.outer(m, theta)
    )
    z = torch.view_as_complex(x.reshape(3, T, D // 2, 2))
    expected = torch.view_as_real(z * phase).reshape(3, T, D)
    torch.testing.assert_close(rope(x, start_pos=2), expected)


def test_rope_scores_depend_only_on_the_relative_position():
    torch.manual_seed(0)
    rope = RotaryEmbedding(16, max_seq_len=64).double()
    q, k = (
        torch.randn(1, 16, dtype=torch.float64),
        torch.randn(1, 16, dtype=torch.float64),
    )
    score = [(rope(q, m) * rope(k, m - 3)).sum() for m in (3, 10, 40)]
    torch.testing.assert_close(score[0], score[1])
    torch.testing.assert_close(score[0], score[2])


def test_rope_keeps_dtype_and_norm():
    x = torch.randn(2, 4, 8, dtype=torch.bfloat16)
    y = RotaryEmbedding(8, 4)(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(
        y.float().norm(dim=-1), x.float().norm(dim=-1), rtol=1e-2, atol=1e-2
    )


def test_rope_rejects_positions_past_its_table():
    rope = RotaryEmbedding(8, max_seq_len=4)
    with pytest.raises(ValueError, match="exceed the RoPE table"):
        rope(torch.randn(1, 5, 8))
    with pytest.raises(ValueError, match="exceed the RoPE table"):
        rope(torch.randn(1, 2, 8), start_pos=3)


def test_rope_rejects_odd_or_mismatched_widths():
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(7, 4)
    with pytest.raises(ValueError, match="last dimension 6"):
        RotaryEmbedding(8, 4)(torch.randn(1, 2, 6))


def test_swiglu_is_the_gated_mlp_of_shazeer_2020():
    torch.manual_seed(0)
    mlp = SwiGLU(8, 12)
    x = torch.randn(3, 8)
    w1, w2, w3 = mlp.w1.weight, mlp.w2.weight, mlp.w3.weight
    expected = (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T  # Shazeer 2020, Eq. 6
    torch.testing.assert_close(mlp(x), expected)


def test_gelu_mlp_is_gpt2s_mlp_with_the_tanh_gelu():
    torch.manual_seed(0)
    mlp = GeluMLP(8, 32)
    with torch.no_grad():
        mlp.w1.bias.normal_()
        mlp.w2.bias.normal_()
    x = torch.randn(3, 8)
    h = x @ mlp.w1.weight.T + mlp.w1.bias
    # GELU, tanh form (Hendrycks & Gimpel 2016, Sec. 2; gelu_new in GPT-2's code)
    gelu = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    torch.testing.assert_close(mlp(x), gelu @ mlp.w2.weight.T + mlp.w2.bias)
