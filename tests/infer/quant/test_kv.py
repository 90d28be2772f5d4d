"""KV-cache quantization: hand values, torch's float8 casts, attention error, budget."""

from __future__ import annotations

import pytest
import torch
from aiinfra.accelerators import GPUS
from aiinfra.infer.quant.kv import (
    dequantize_kv,
    kv_attention_error,
    kv_tokens,
    quantize_kv,
    quantized_bytes_per_token,
    round_trip,
)
from aiinfra.models.kv_budget import kv_budget
from aiinfra.models.presets import preset


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_int8_scales_per_token_and_head_match_hand_values() -> None:
    # token 0: max |k| = 2 -> s = 2/127, q = round(127 x / 2): 19.05 -> 19, -63.5 -> -64
    # (round half to even), 127; token 1: all zero -> stays zero.
    k = torch.tensor([[[[0.3, -1.0, 2.0], [0.0, 0.0, 0.0]]]])  # (1, 1, 2, 3)
    qkv = quantize_kv(k, "int8")
    assert qkv.codes.tolist() == [[[[19, -64, 127], [0, 0, 0]]]]
    assert qkv.scale.shape == (1, 1, 2, 1)
    assert qkv.scale[0, 0, 0, 0].item() == pytest.approx(2 / 127)
    assert dequantize_kv(qkv)[0, 0, 1].tolist() == [0.0, 0.0, 0.0]


def test_fp8_codes_match_hand_e4m3_values() -> None:
    # scale 1: 0.1 = 1.6 x 2^-4 rounds to 1.625 x 2^-4 = 0.1015625 (3 mantissa bits);
    # 0.3 -> 1.25 x 2^-2 = 0.3125; 500 saturates at 448 = 1.75 x 2^8; 2^-9 is the
    # smallest subnormal, 2^-11 rounds to 0.
    x = torch.tensor([0.1, 0.3, 500.0, -(2.0**-9), 2.0**-11])
    q = quantize_kv(x, "fp8", scale=1.0)
    assert q.codes.dtype == torch.float8_e4m3fn
    assert dequantize_kv(q).tolist() == [0.1015625, 0.3125, 448.0, -(2.0**-9), 0.0]


def test_fp8_default_scale_maps_the_largest_value_to_448() -> None:
    x = torch.randn(2, 2, 8, 16, generator=_gen()) * 3
    qkv = quantize_kv(x, "fp8")
    assert qkv.scale.item() == pytest.approx(x.abs().max().item() / 448)
    assert qkv.codes.float().abs().max().item() == 448.0
    # normal e4m3 numbers: relative error at most half a step of 3 mantissa bits
    y = dequantize_kv(qkv)
    big = x.abs() >= 2.0**-6 * qkv.scale  # above e4m3's smallest normal
    assert ((y - x).abs()[big] <= 2.0**-4 * x.abs()[big] + 1e-7).all()


def test_int8_error_is_at_most_half_a_step_per_token() -> None:
    x = torch.randn(2, 4, 16, 32, generator=_gen(1))
    qkv = quantize_kv(x, "int8")
    assert ((dequantize_kv(qkv) - x).abs() <= qkv.scale / 2 + 1e-7).all()


def test_bf16_round_trip_is_torch_cast() -> None:
    x = torch.tensor([1.0 + 2.0**-9, 3.0])  # 1 + 2^-9 is below bf16's half step
    assert round_trip(x, "bf16").tolist() == [1.0, 3.0]


def test_attention_error_orders_formats_and_zero_for_exact_cache() -> None:
    g = _gen(2)
    q = torch.randn(1, 8, 4, 64, generator=g)  # (B, H, T_q, d)
    k, v = (torch.randn(1, 2, 128, 64, generator=g) for _ in range(2))  # (B, G, T, d)
    err = {f: kv_attention_error(q, k, v, f) for f in ("bf16", "fp8", "int8")}
    # int8 per token keeps 7 bits of a token's range, e4m3 3 mantissa bits, bf16 8
    assert 0 < err["bf16"] < err["int8"] < err["fp8"] < 0.05
    # a cache whose values are exact in every format gives exactly SDPA
    k2 = torch.ones(1, 2, 8, 64)
    assert kv_attention_error(q, k2, k2, "int8") == 0.0


def test_attention_error_against_a_hand_computed_gqa_reference() -> None:
    g = _gen(3)
    q = torch.randn(1, 4, 2, 16, generator=g)
    k, v = (torch.randn(1, 2, 8, 16, generator=g) for _ in range(2))
    k_hat = dequantize_kv(quantize_kv(k, "int8")).repeat_interleave(2, dim=1)
    v_hat = dequantize_kv(quantize_kv(v, "int8")).repeat_interleave(2, dim=1)
    kk, vv = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    p_hat = torch.softmax(q @ k_hat.transpose(-1, -2) / 4, dim=-1)
    p = torch.softmax(q @ kk.transpose(-1, -2) / 4, dim=-1)
    want = ((p_hat @ v_hat) - (p @ vv)).abs().max().item()
    assert kv_attention_error(q, k, v, "int8") == pytest.approx(want, abs=1e-6)


def test_bytes_per_token_of_llama_3_8b_match_hand_counts() -> None:
    # 2 (K, V) x G = 8 x d = 128 x L = 32 = 65536 elements per token; int8 adds
    # 2 x 8 x 32 fp32 scales = 2048 bytes.
    c = preset("llama-3-8b")
    assert quantized_bytes_per_token(c, "bf16") == 131072
    assert quantized_bytes_per_token(c, "fp8") == 65536
    assert quantized_bytes_per_token(c, "int8") == 65536 + 2048
    assert quantized_bytes_per_token(c, "int8", scale_bytes=2) == 65536 + 1024


def test_fp8_cache_fits_twice_the_tokens_of_kv_budget_bf16() -> None:
    c = preset("llama-3-8b")
    h100 = GPUS["H100"]
    bf16 = kv_budget(c, h100).tokens  # the models chapter's count
    assert kv_tokens(c, h100, "bf16") == bf16
    assert kv_tokens(c, h100, "fp8") == kv_budget(c, h100, bytes_per_element=1).tokens
    assert kv_tokens(c, h100, "fp8") in (2 * bf16, 2 * bf16 + 1)
    free = kv_budget(c, h100).free_bytes
    assert kv_tokens(c, h100, "int8") == free // (65536 + 2048)  # 1.94x, not 2x
    assert kv_tokens(preset("llama-3-70b"), h100, "fp8") == 0  # weights overflow


def test_bad_input_is_rejected() -> None:
    x = torch.randn(1, 1, 4, 8)
    with pytest.raises(ValueError, match="fmt must be one of"):
        quantize_kv(x, "int4")
    with pytest.raises(ValueError, match="scale is computed per token"):
        quantize_kv(x, "int8", scale=1.0)
    with pytest.raises(ValueError, match="scale must be positive"):
        quantize_kv(x, "fp8", scale=0.0)
    with pytest.raises(TypeError, match="x must be a floating-point"):
        quantize_kv(x.long())
    with pytest.raises(ValueError, match="fmt must be one of"):
        round_trip(x, "fp16")
    with pytest.raises(ValueError, match="H a multiple of G"):
        kv_attention_error(torch.randn(1, 3, 2, 8), x.expand(1, 2, 4, 8), x, "int8")
    with pytest.raises(ValueError, match="must be 4-D"):
        kv_attention_error(x[0], x, x, "int8")
    with pytest.raises(ValueError, match="scale_bytes must be an int >= 1"):
        quantized_bytes_per_token(preset("llama-3-8b"), "int8", scale_bytes=0)
    with pytest.raises(ValueError, match="fmt must be one of"):
        kv_tokens(preset("llama-3-8b"), GPUS["H100"], "int4")
    with pytest.raises(ValueError, match="n_gpus must be an int >= 1"):
        kv_tokens(preset("llama-3-8b"), GPUS["H100"], "fp8", n_gpus=0)


def test_e4m3_relative_error_holds_in_the_normal_range_only() -> None:
    # torch's float8_e4m3fn cast is the ground truth: round to nearest with 3
    # mantissa bits, so |x - fp8(x)| <= 2^-4 |x| from 2^-6 (the smallest normal,
    # exponent bias 7) to 448; the subnormals below keep a fixed step of 2^-9,
    # and their relative error grows to 1/2 at 2^-10 (OCP FP8 spec, Table 1).
    from aiinfra.infer.quant.kv import FP8_MIN_NORMAL, FP8_REL_ERROR

    x = torch.logspace(-12, 8.8, 20001, base=2, dtype=torch.float64)
    rel = (x - x.to(torch.float8_e4m3fn).double()).abs() / x
    normal = x >= FP8_MIN_NORMAL
    assert FP8_MIN_NORMAL == float(torch.finfo(torch.float8_e4m3fn).smallest_normal)
    assert rel[normal].max() <= FP8_REL_ERROR
    assert rel[normal].max() > 0.9 * FP8_REL_ERROR  # sup: 1/17, just above 1 + 1/16
    assert rel[~normal & (x > 2**-10)].max() > 4 * FP8_REL_ERROR
