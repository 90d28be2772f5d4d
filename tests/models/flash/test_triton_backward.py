"""The Triton backward kernels: gradients equal SDPA's under the 2x tolerance rule."""

import os

import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.flash.triton_backward import flash_attention_triton
from aiinfra.models.flash.triton_forward import HAS_TRITON

pytestmark = [
    pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed"),
    pytest.mark.skipif(
        os.environ.get("TRITON_INTERPRET") != "1",
        reason="the CPU tests need TRITON_INTERPRET=1",
    ),
]


def error(x: torch.Tensor, ref: torch.Tensor) -> float:
    return (x.double() - ref).abs().max().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_triton_gradients_match_sdpa_in_the_interpreter(dtype, causal):
    g = torch.Generator().manual_seed(0)
    shape = (1, 2, 37, 16)  # (B, H, N, D): N is not a multiple of the 16-blocks
    q, k, v = (
        torch.randn(shape, generator=g, dtype=dtype).requires_grad_() for _ in range(3)
    )
    do = torch.randn(shape, generator=g, dtype=dtype)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
    refs = torch.autograd.grad(ref, (q64, k64, v64), do.double())
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    their_grads = torch.autograd.grad(theirs, (q, k, v), do)
    ours = flash_attention_triton(q, k, v, causal)
    our_grads = torch.autograd.grad(ours, (q, k, v), do)
    for a, b, r in zip(our_grads, their_grads, refs, strict=True):
        assert a.dtype == dtype
        slack = 2 * torch.finfo(dtype).eps * r.abs().max().item()
        assert error(a, r) <= 2 * error(b, r) + slack


def test_bad_input_is_rejected_before_launch():
    q = torch.randn(1, 1, 8, 24, requires_grad=True)
    with pytest.raises(ValueError, match="power of two >= 16"):
        flash_attention_triton(q, q, q)
