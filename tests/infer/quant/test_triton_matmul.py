"""The Triton weight-only matmul against F.linear on the dequantized weight.

conftest.py sets TRITON_INTERPRET=1 before the kernel is defined, so it runs on CPU
tensors at tiny shapes; the full-size check with timing needs a GPU.
"""

from __future__ import annotations

import os

import aiinfra.infer.quant.triton_matmul as quant_triton
import pytest
import torch
import torch.nn.functional as F
from aiinfra.accelerators import GPUS
from aiinfra.infer.quant.rtn import QuantizedLinear, dequantize, pack_int4, quantize
from aiinfra.models.presets import preset

needs_triton = pytest.mark.skipif(
    not quant_triton.HAS_TRITON, reason="triton is not installed"
)
interpreted = os.environ.get("TRITON_INTERPRET") == "1"


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@needs_triton
@pytest.mark.skipif(not interpreted, reason="the CPU tests need TRITON_INTERPRET=1")
@pytest.mark.parametrize(
    ("bits", "scheme", "granularity", "group_size"),
    [
        (4, "absmax", "group", 16),
        (4, "zeropoint", "channel", None),
        (8, "absmax", "channel", None),
        (8, "zeropoint", "group", 16),
    ],
)
def test_kernel_equals_f_linear_on_the_dequantized_weight(
    bits, scheme, granularity, group_size
):
    # Odd sizes (M = 5, N = 20) exercise the masks; K = 32 is 2 steps of B_K = 16.
    g = _gen()
    w = torch.randn(20, 32, generator=g)  # (N, K)
    x = torch.randn(5, 32, generator=g)  # (M, K)
    layer = QuantizedLinear(w, None, bits, scheme, granularity, group_size)
    ref = F.linear(x.double(), layer.dequantized_weight().double())
    ours = quant_triton.quantized_linear_triton(layer, x)
    assert ours.shape == (5, 20) and ours.dtype == torch.float32
    # fp32 products of the same dequantized weights: only the summation order differs
    torch.testing.assert_close(ours.double(), ref, rtol=1e-5, atol=1e-5)
    # and the weight really was quantized: F.linear on w itself is visibly off
    assert (ours.double() - F.linear(x, w).double()).abs().max() > 1e-3


@needs_triton
@pytest.mark.skipif(not interpreted, reason="the CPU tests need TRITON_INTERPRET=1")
def test_kernel_keeps_leading_dims_and_adds_the_bias():
    g = _gen(1)
    linear = torch.nn.Linear(32, 16)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(16, 32, generator=g))
    layer = QuantizedLinear.from_linear(
        linear, bits=4, granularity="group", group_size=16
    )
    x = torch.randn(2, 3, 32, generator=g)  # (B, T, K)
    ours = quant_triton.quantized_linear_triton(layer, x)
    torch.testing.assert_close(ours, layer(x), rtol=1e-5, atol=1e-5)
    assert ours.shape == (2, 3, 16)


@needs_triton
@pytest.mark.skipif(not interpreted, reason="the CPU tests need TRITON_INTERPRET=1")
def test_int4_kernel_matches_hand_values():
    # W = [[1, -2, 3, -8], [7, 0, -1, 2]] as absmax codes with scale 0.5 per row:
    # y = x W^T / 2 with x = [1, 1, 1, 1] gives [-6 / 2, 8 / 2] = [-3, 4].
    q = torch.tensor([[1, -2, 3, -8] * 8, [7, 0, -1, 2] * 8], dtype=torch.int8)
    scale = torch.full((2, 1), 0.5)
    x = torch.ones(1, 32)
    y = quant_triton.weight_only_matmul(x, pack_int4(q), scale, bits=4)
    assert y.tolist() == [[-3.0 * 8, 4.0 * 8]]


@needs_triton
def test_bad_input_is_rejected():
    w = torch.randn(16, 32)
    qt = quantize(w, bits=8, granularity="channel")
    x = torch.randn(2, 32)
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        quant_triton.weight_only_matmul(x, qt.q, qt.scale, bits=2)
    with pytest.raises(TypeError, match="codes must be torch.int8"):
        quant_triton.weight_only_matmul(x, qt.q.to(torch.uint8), qt.scale, bits=8)
    with pytest.raises(ValueError, match="codes must be"):
        quant_triton.weight_only_matmul(torch.randn(2, 30), qt.q, qt.scale, bits=8)
    with pytest.raises(ValueError, match="scale must be"):
        quant_triton.weight_only_matmul(x, qt.q, torch.ones(16, 3), bits=8)
    with pytest.raises(ValueError, match="block_n must be a power of two"):
        quant_triton.weight_only_matmul(x, qt.q, qt.scale, bits=8, block_n=24)
    with pytest.raises(TypeError, match="x must be a floating-point"):
        quant_triton.weight_only_matmul(x.long(), qt.q, qt.scale, bits=8)
    with pytest.raises(TypeError, match="layer must be a QuantizedLinear"):
        quant_triton.quantized_linear_triton(torch.nn.Linear(32, 16), x)


@pytest.mark.gpu
@needs_triton
@pytest.mark.skipif(interpreted, reason="compiles the kernel: needs a GPU")
@pytest.mark.parametrize("bits", [4, 8])
def test_kernel_at_full_size_on_a_gpu_and_its_time_against_fp16(bits):
    # One decoding step's MLP up-projection of Llama 3 8B (K = 4096, N = 14336) for 16
    # sequences, fp16, group size 128. Error rule (STYLE.md): at most twice that of
    # fp16 F.linear on the same dequantized weight, both against fp32.
    from triton.testing import do_bench

    g = torch.Generator(device="cuda").manual_seed(0)
    w = torch.randn(14336, 4096, device="cuda", generator=g) / 64
    x = torch.randn(16, 4096, device="cuda", generator=g, dtype=torch.float16)
    qt = quantize(w, bits=bits, granularity="group", group_size=128)
    codes = pack_int4(qt.q) if bits == 4 else qt.q
    w_hat = dequantize(qt)  # (N, K) fp32
    ref = F.linear(x.float(), w_hat)
    ours = quant_triton.weight_only_matmul(x, codes, qt.scale, bits=bits)
    theirs = F.linear(x, w_hat.half())
    err, err_fp16 = ((y.float() - ref).abs().max().item() for y in (ours, theirs))
    assert err <= 2 * err_fp16 + 1e-3, (err, err_fp16)
    t_ours = do_bench(
        lambda: quant_triton.weight_only_matmul(x, codes, qt.scale, bits=bits)
    )
    t_fp16 = do_bench(lambda: F.linear(x, w_hat.half()))
    print(
        f"int{bits} kernel {t_ours * 1e3:.1f} us, fp16 F.linear {t_fp16 * 1e3:.1f} us"
    )
    # the weight is read once per step; fewer bytes must not make the step slower
    # than 1.5x the fp16 matmul even with this untuned kernel
    assert t_ours < 1.5 * t_fp16, (t_ours, t_fp16)


def test_decode_step_time_matches_hand_counts_for_llama_3_8b() -> None:
    # Matmul weights read per step: attention 1342177280 + MLP 5637144576 + head
    # 525336576 = 7504658432; the KV cache of one token is 2 x 8 x 128 x 32 x 2 bytes,
    # read for the cached token and written for the new one; bf16 norm gains (65 of
    # 4096) and the new token's embedding row stay unquantized.
    c, h100 = preset("llama-3-8b"), GPUS["H100"]
    n, kv, other = 7504658432, 131072, 2 * (65 * 4096 + 4096)
    bf16 = quant_triton.decode_step_time(c, h100, 1, 1, "bf16")
    assert bf16 == pytest.approx((2 * n + other + 2 * kv) / 3.35e12)  # 4.48 ms
    int4 = quant_triton.decode_step_time(c, h100, 1, 1, "int4")
    assert int4 == pytest.approx((n / 2 + 2 * n / 128 + other + 2 * kv) / 3.35e12)
    # 4096 sequences of one token: compute-bound, fp8 at its own dense peak; each
    # new token attends to the cached one and itself
    flops = 4096 * (2 * n + 2 * 4 * 32 * 128 * 32)
    big = {
        w: quant_triton.decode_step_time(c, h100, 4096, 1, w) for w in ("int4", "fp8")
    }
    assert big["int4"] == pytest.approx(flops / 989e12)  # weight-only: bf16 math
    assert big["fp8"] == pytest.approx(flops / 1979e12)
    with pytest.raises(ValueError, match="weights must be one of"):
        quant_triton.decode_step_time(c, h100, 1, 1, "int2")
    with pytest.raises(ValueError, match="batch must be an int >= 1"):
        quant_triton.decode_step_time(c, h100, 0, 1)
    with pytest.raises(ValueError, match="dense model"):  # all experts read, K used
        quant_triton.decode_step_time(preset("mixtral-8x7b"), h100, 1, 1)
