"""The Triton FlashAttention kernel against PyTorch, in the CPU interpreter.

conftest.py sets TRITON_INTERPRET=1 before any kernel is defined, so the kernel runs
on CPU tensors at small shapes; the full-size check (forward and backward kernels)
needs a GPU, where conftest.py leaves TRITON_INTERPRET unset and the kernels compile.
"""

import importlib.util
import os
import sys

import aiinfra.models.flash.triton_forward as flash_triton
import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.flash.attention import tiled_forward

needs_triton = pytest.mark.skipif(
    not flash_triton.HAS_TRITON, reason="triton is not installed"
)
interpreted = os.environ.get("TRITON_INTERPRET") == "1"


def error(x: torch.Tensor, ref: torch.Tensor) -> float:
    return (x.double() - ref).abs().max().item()


@needs_triton
@pytest.mark.skipif(not interpreted, reason="the CPU tests need TRITON_INTERPRET=1")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [97, 33])
def test_triton_forward_matches_sdpa_in_the_interpreter(dtype, causal, n):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 16, generator=g, dtype=dtype) for _ in range(3))
    ref = F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=causal
    )
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    ours, lse = flash_triton.flash_attention_triton_forward(q, k, v, causal)
    assert ours.dtype == dtype and ours.shape == q.shape
    slack = (
        2 * torch.finfo(dtype).eps * ref.abs().max().item()
    )  # see test_flash_attention
    assert error(ours, ref) <= 2 * error(theirs, ref) + slack
    _, lse_ref = tiled_forward(q.double(), k.double(), v.double(), causal, 0.25, 16, 16)
    torch.testing.assert_close(lse.double(), lse_ref, rtol=1e-5, atol=1e-5)


@needs_triton
def test_bad_input_is_rejected():
    q = torch.randn(1, 1, 8, 24)
    with pytest.raises(ValueError, match="power of two >= 16, got 24"):
        flash_triton.flash_attention_triton_forward(q, q, q)
    q = torch.randn(1, 1, 8, 16)
    with pytest.raises(ValueError, match="block_m must be a power of two"):
        flash_triton.flash_attention_triton_forward(q, q, q, block_m=8)
    with pytest.raises(ValueError, match="same shape"):
        flash_triton.flash_attention_triton_forward(q, q[..., :4, :], q)


def test_the_module_imports_without_triton(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` now fails
    monkeypatch.setitem(sys.modules, "triton.language", None)
    spec = importlib.util.spec_from_file_location(
        "flash_triton_no_triton", flash_triton.__file__
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not module.HAS_TRITON
    q = torch.randn(1, 1, 16, 16)
    with pytest.raises(ImportError, match="needs the triton package"):
        module.flash_attention_triton_forward(q, q, q)


@pytest.mark.gpu
@needs_triton
@pytest.mark.skipif(interpreted, reason="compiles the kernels: needs a GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_triton_kernels_match_sdpa_at_full_size_on_a_gpu(dtype, causal):
    # Forward and backward kernels, B=2, H=16, N=4096, D=128, compiled, against an
    # fp32 reference with the 2x rule (STYLE.md): at most twice SDPA's own error.
    from aiinfra.models.flash.attention import standard_attention
    from aiinfra.models.flash.triton_backward import flash_attention_triton

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        torch.randn(
            2, 16, 4096, 128, device="cuda", dtype=dtype, generator=g
        ).requires_grad_()
        for _ in range(3)
    )
    do = torch.randn(q.shape, device="cuda", dtype=dtype, generator=g)
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref = standard_attention(q32, k32, v32, causal)  # fp32 reference
    refs = [ref, *torch.autograd.grad(ref, (q32, k32, v32), do.float())]
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    theirs = [theirs, *torch.autograd.grad(theirs, (q, k, v), do)]
    ours = flash_attention_triton(q, k, v, causal)
    ours = [ours, *torch.autograd.grad(ours, (q, k, v), do)]
    for name, a, b, r in zip(("o", "dq", "dk", "dv"), ours, theirs, refs, strict=True):
        err, err_sdpa = ((x.float() - r).abs().max().item() for x in (a, b))
        assert err <= 2 * err_sdpa + 1e-5, (name, err, err_sdpa)
