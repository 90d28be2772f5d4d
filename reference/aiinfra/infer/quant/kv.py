"""KV-cache quantization: int8 per token and head, fp8 e4m3 per tensor.

Decoding reads the whole KV cache at every step, and the cache, not the weights,
limits how many tokens a GPU holds (:mod:`aiinfra.models.kv_budget`). Storing it in
8 bits halves both. Two recipes: *int8* with an absmax scale per token and per
key/value head, ``s = max_d |k| / 127`` over the head's ``d`` elements, computed
when the token is appended, so no calibration is needed (KIVI, Liu et al. 2024,
finds keys better grouped per channel, values per token); and *fp8* e4m3
(Micikevicius et al. 2022) with one scale per tensor, ``s = max |k| / 448``, cast
with ``torch.float8_e4m3fn``, as vLLM's ``kv_cache_dtype="fp8"`` stores it (its
``k_scale`` and ``v_scale``, calibrated offline or 1.0). e4m3 keeps 3 mantissa
bits in its normal range (``2^-6`` to 448), a relative error of at most ``2^-4``;
below ``2^-6`` its subnormals keep a fixed step of ``2^-9``, so small values lose
more; int8 a uniform step ``s`` per token, an error of at most ``s / 2``.
Attention dequantizes on load and computes in the queries' precision. Notation:
``B`` sequences, ``G`` key/value heads, ``T`` tokens, ``d`` head width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from aiinfra import checks
from aiinfra.accelerators import Gpu
from aiinfra.infer.quant.rtn import check_float_tensor
from aiinfra.models.attention.kv_cache_size import kv_bytes_per_token
from aiinfra.models.config import TransformerConfig
from aiinfra.models.kv_budget import kv_budget

KV_FORMATS = ("bf16", "fp8", "int8")  # bf16: the unquantized cache
CODE_BYTES = {"bf16": 2, "fp8": 1, "int8": 1}
FP8_MAX = 448.0  # largest finite float8_e4m3fn: 1.75 x 2^8
FP8_MIN_NORMAL = 2.0**-6  # smallest normal e4m3 (exponent bias 7); subnormals below
FP8_REL_ERROR = 2.0**-4  # half a step of 3 mantissa bits, in the normal range only
INT8_MAX = 127


@dataclass(frozen=True)
class QuantizedKV:
    """A quantized key or value cache.

    Attributes:
        codes: ``(B, G, T, d)``, int8 or float8_e4m3fn.
        scale: fp32; ``(B, G, T, 1)`` for int8 (per token and head), ``()`` for fp8.
        fmt: ``"int8"`` or ``"fp8"``.
    """

    codes: Tensor
    scale: Tensor
    fmt: str


def _check_fmt(fmt: str, allowed: tuple[str, ...]) -> None:
    if fmt not in allowed:
        raise ValueError(f"fmt must be one of {allowed}, got {fmt!r}")


def quantize_kv(
    x: Tensor, fmt: str = "int8", scale: float | None = None
) -> QuantizedKV:
    """Quantize a key or value cache ``(B, G, T, d)``.

    Args:
        x: floating cache, at least 1-D; the last dimension is ``d``.
        fmt: ``"int8"`` (absmax per token and head) or ``"fp8"`` (e4m3, one scale).
        scale: fp8 only: a fixed scale (vLLM's ``k_scale``); default
            ``max |x| / 448``. Values beyond ``448 scale`` saturate.

    Returns:
        Codes and scales.

    Raises:
        TypeError: if ``x`` is not floating-point.
        ValueError: if ``x`` is empty, ``fmt`` is unknown, ``scale`` is not positive
            or is given for int8.
    """
    check_float_tensor("x", x)
    _check_fmt(fmt, ("int8", "fp8"))
    xf = x.detach().float()
    if fmt == "int8":
        if scale is not None:
            raise ValueError("scale is computed per token for fmt='int8'; pass None")
        # region int8
        s = xf.abs().amax(dim=-1, keepdim=True) / INT8_MAX  # (B, G, T, 1)
        s = torch.where(s > 0, s, torch.ones_like(s))  # an all-zero token stays zero
        q = torch.round(xf / s).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
        # endregion
        return QuantizedKV(q, s, fmt)
    if scale is None:
        amax = xf.abs().amax()
        s = amax / FP8_MAX if amax > 0 else torch.ones(())  # ()
    elif not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    else:
        s = torch.tensor(float(scale))
    s = s.to(x.device)
    # the cast rounds to nearest even; clamp first: e4m3fn has no infinity
    q = (xf / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return QuantizedKV(q, s, fmt)


def dequantize_kv(qkv: QuantizedKV, dtype: torch.dtype = torch.float32) -> Tensor:
    """``codes * scale`` in ``dtype``, the shape of the cache."""
    return (qkv.codes.float() * qkv.scale).to(dtype)


def round_trip(x: Tensor, fmt: str) -> Tensor:
    """``x`` stored in ``fmt`` and read back in fp32 (``"bf16"``: a plain cast).

    Raises:
        ValueError: ``fmt`` is not one of :data:`KV_FORMATS`.
    """
    _check_fmt(fmt, KV_FORMATS)
    if fmt == "bf16":
        return check_float_tensor("x", x).to(torch.bfloat16).float()
    return dequantize_kv(quantize_kv(x, fmt))


def kv_attention_error(q: Tensor, k: Tensor, v: Tensor, fmt: str) -> float:
    """Largest error of attention over a ``fmt`` cache, against the fp32 one.

    Args:
        q: queries ``(B, H, T_q, d)``.
        k: keys ``(B, G, T, d)``, ``H`` a multiple of ``G``.
        v: values, the shape of ``k``.
        fmt: one of :data:`KV_FORMATS`.

    Returns:
        ``max |O_fmt - O_fp32|`` over all outputs (no causal mask).

    Raises:
        TypeError: an input is not floating-point.
        ValueError: bad shapes or ``fmt``.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float_tensor(name, t)
        if t.dim() != 4:
            raise ValueError(
                f"{name} must be 4-D (B, heads, T, d), got {tuple(t.shape)}"
            )
    if k.shape != v.shape or q.shape[-1] != k.shape[-1] or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"k and v must have one shape (B, G, T, d) with H a multiple of G, got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    _check_fmt(fmt, KV_FORMATS)
    q32, k32, v32 = q.float(), k.float(), v.float()
    ref = F.scaled_dot_product_attention(q32, k32, v32, enable_gqa=True)
    k_hat, v_hat = round_trip(k32, fmt), round_trip(v32, fmt)
    ours = F.scaled_dot_product_attention(q32, k_hat, v_hat, enable_gqa=True)
    return (ours - ref).abs().max().item()


def quantized_bytes_per_token(
    c: TransformerConfig, fmt: str, scale_bytes: int = 4
) -> int:
    """Bytes of a ``fmt`` cache per token over all layers, scales included.

    The codes are :func:`~aiinfra.models.attention.kv_cache_size.kv_bytes_per_token`
    at the format's size; int8 adds one scale per token, layer and cached head
    (keys and values apart; MLA's latent is one "head"); fp8's per-tensor scales
    are negligible.

    Args:
        c: the model.
        fmt: one of :data:`KV_FORMATS`.
        scale_bytes: bytes of one int8 scale (4: fp32, as :func:`quantize_kv`).

    Raises:
        ValueError: ``fmt`` unknown or ``scale_bytes`` not a positive integer.
    """
    _check_fmt(fmt, KV_FORMATS)
    checks.positive_int("scale_bytes", scale_bytes)
    codes = kv_bytes_per_token(c, CODE_BYTES[fmt])
    if fmt != "int8":
        return codes
    heads = 1 if c.is_mla else 2 * c.n_kv_heads  # scales per token and layer
    return codes + heads * c.n_layers * scale_bytes


def kv_tokens(
    c: TransformerConfig,
    gpu: Gpu,
    fmt: str,
    n_gpus: int = 1,
    bytes_per_weight: int = 2,
) -> int:
    """Tokens of ``fmt`` cache that fit next to the weights (0 if they do not fit).

    The free bytes are :func:`aiinfra.models.kv_budget.kv_budget`'s: ``n_gpus``
    HBMs minus the weights, nothing reserved (an upper bound).

    Raises:
        ValueError: as :func:`quantized_bytes_per_token` and ``kv_budget``.
    """
    free = kv_budget(c, gpu, n_gpus, bytes_per_weight=bytes_per_weight).free_bytes
    return max(free, 0) // quantized_bytes_per_token(c, fmt)
