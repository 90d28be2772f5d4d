"""Tiled FlashAttention in PyTorch equals SDPA in value and gradient.

Tolerance rule of the flash-attention repository's tests: against an fp64
reference, the implementation may be at most twice as wrong as PyTorch's own
attention at the same dtype.
"""

import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.flash.attention import (
    FlashAttention,
    flash_attention,
    standard_attention,
)


def error(x: torch.Tensor, ref: torch.Tensor) -> float:
    return (x.double() - ref).abs().max().item()


def assert_at_most_twice_as_wrong(ours, theirs, ref, dtype):
    """``|ours - ref| <= 2 |theirs - ref| + slack``; the slack, two units of rounding
    at the reference's scale, keeps the rule meaningful when both errors are
    rounding-level (fp32), where their ratio is noise."""
    slack = 2 * torch.finfo(dtype).eps * ref.abs().max().item()
    assert error(ours, ref) <= 2 * error(theirs, ref) + slack


def inputs(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(shape, generator=g, dtype=dtype).requires_grad_() for _ in range(3)
    ]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "n, block_q, block_k", [(97, 16, 32), (33, 8, 5), (64, 64, 64)]
)
def test_tiled_attention_matches_sdpa_in_value_and_gradient(
    dtype, causal, n, block_q, block_k
):
    shape = (2, 3, n, 16)  # (B, H, T, d)
    q, k, v = inputs(shape, dtype)
    do = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=dtype)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
    ref_grads = torch.autograd.grad(ref, (q64, k64, v64), do.double())
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    their_grads = torch.autograd.grad(theirs, (q, k, v), do)
    ours = flash_attention(q, k, v, causal, block_q=block_q, block_k=block_k)
    our_grads = torch.autograd.grad(ours, (q, k, v), do)
    assert ours.dtype == dtype and ours.shape == shape
    assert_at_most_twice_as_wrong(ours, theirs, ref, dtype)
    for g_ours, g_theirs, g_ref in zip(our_grads, their_grads, ref_grads, strict=True):
        assert_at_most_twice_as_wrong(g_ours, g_theirs, g_ref, dtype)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_passes_gradcheck_in_fp64(causal):
    q, k, v = inputs((1, 1, 9, 4), torch.float64)
    assert torch.autograd.gradcheck(
        lambda q, k, v: FlashAttention.apply(q, k, v, causal, 0.5, 4, 3), (q, k, v)
    )


def test_standard_attention_is_sdpa():
    q, k, v = inputs((1, 2, 13, 8), torch.float64)
    for causal in (False, True):
        torch.testing.assert_close(
            standard_attention(q, k, v, causal),
            F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        )


def test_only_linear_memory_is_saved_for_backward():
    q, k, v = inputs((1, 1, 40, 8), torch.float32)
    o = flash_attention(q, k, v, block_q=8, block_k=8)
    saved = o.grad_fn.saved_tensors  # q, k, v, O and the log-sum-exp L
    assert [tuple(t.shape) for t in saved] == [(1, 1, 40, 8)] * 4 + [(1, 1, 40)]


def test_bad_input_is_rejected():
    q, k, v = inputs((1, 2, 8, 16), torch.float32)
    with pytest.raises(ValueError, match="same shape"):
        flash_attention(q, k[..., :8], v)  # head dims differ
    with pytest.raises(ValueError, match=r"q must be \(B, H, T, d\)"):
        flash_attention(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="share a float dtype"):
        flash_attention(q, k.double(), v)
    with pytest.raises(ValueError, match="block_k must be a positive integer"):
        flash_attention(q, k, v, block_k=0)
