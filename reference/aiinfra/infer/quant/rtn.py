"""Round-to-nearest weight quantization: absmax and zero-point, int8 and int4.

A float tensor ``x`` is stored as integer codes ``q`` and a float scale ``s`` per
group of elements. *Absmax* (symmetric) quantization maps ``[-max|x|, max|x|]`` onto
``[-Q, Q]`` with ``Q = 2^(b-1) - 1``: ``s = max|x| / Q``, ``q = round(x / s)``, so for
int8 ``q = round(127 x / max|x|)``. *Zero-point* (asymmetric) quantization maps
``[min, max]`` onto ``[0, 2^b - 1]``: ``s = (max - min) / (2^b - 1)``,
``z = round(-min / s)``, ``q = round(x / s) + z``, and ``x ~ (q - z) s``; as in
PyTorch's observers the range is widened to contain 0, so 0 is exact. Both are
rounded to nearest, so ``|x - dequantize(q)| <= s / 2`` elementwise (Dettmers et al.
2022, Sec. 2; Nagel et al. 2021, Sec. 2). The group that shares a scale is the whole
tensor (*per-tensor*), one output row of a weight ``(out, in)`` (*per-channel*), or
``g`` consecutive inputs of one row (*group-wise*, as in GPTQ and AWQ): the smaller the
group, the less one outlier inflates the others' rounding step. int4 codes are kept
one per byte in an int8 (symmetric) or uint8 (zero-point) tensor, and
:func:`pack_int4` stores two per byte. :class:`QuantizedLinear` keeps only the codes
and scales and dequantizes its weight on the fly in ``forward``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

BITS = (4, 8)
SCHEMES = ("absmax", "zeropoint")
GRANULARITIES = ("tensor", "channel", "group")


@dataclass(frozen=True)
class QuantizedTensor:
    """Integer codes with the scales (and zero-points) that map them back to floats.

    Attributes:
        q: codes, shape of the original tensor; int8 for absmax, uint8 for zeropoint.
        scale: float32 step per group, shape ``(R, G)``: ``(1, 1)`` per-tensor,
            ``(out, 1)`` per-channel, ``(out, in / g)`` group-wise.
        zero: int32 zero-points of the same shape as ``scale``, or None for absmax.
        bits: code width, 4 or 8.
        dtype: floating dtype of the original tensor (the dequantized result's).
    """

    q: Tensor
    scale: Tensor
    zero: Tensor | None
    bits: int
    dtype: torch.dtype


def check_float_tensor(name: str, x: object) -> Tensor:
    """Return ``x`` if it is a non-empty floating tensor, else raise naming ``name``.

    Raises:
        TypeError: if ``x`` is not a floating-point ``torch.Tensor``.
        ValueError: if ``x`` is empty.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if x.numel() == 0:
        raise ValueError(f"{name} must be non-empty, got shape {tuple(x.shape)}")
    return x


def _check_bits(bits: int) -> None:
    if bits not in BITS:
        raise ValueError(f"bits must be one of {BITS}, got {bits!r}")


def _grouped_shape(
    shape: torch.Size, granularity: str, group_size: int | None
) -> tuple[int, int, int]:
    """Shape ``(R, G, L)``: R rows of G groups of L elements that share one scale."""
    if granularity not in GRANULARITIES:
        raise ValueError(
            f"granularity must be one of {GRANULARITIES}, got {granularity!r}"
        )
    if granularity != "group" and group_size is not None:
        raise ValueError(
            f"group_size is only used with granularity='group', got {group_size}"
        )
    if granularity == "tensor":
        return 1, 1, shape.numel()
    if len(shape) != 2:
        raise ValueError(
            f"granularity={granularity!r} needs a 2-D weight (out, in), "
            f"got shape {tuple(shape)}"
        )
    n_out, n_in = shape
    if granularity == "channel":
        return n_out, 1, n_in
    if not isinstance(group_size, int) or group_size <= 0 or n_in % group_size:
        raise ValueError(
            f"group_size must be a positive integer dividing the input dimension "
            f"{n_in}, got {group_size!r}"
        )
    return n_out, n_in // group_size, group_size


def quantize(
    x: Tensor,
    bits: int = 8,
    scheme: str = "absmax",
    granularity: str = "tensor",
    group_size: int | None = None,
) -> QuantizedTensor:
    """Quantize ``x`` to ``bits``-bit integers by rounding to nearest.

    Args:
        x: floating tensor; 2-D ``(out, in)`` unless ``granularity='tensor'``.
        bits: code width, 4 or 8.
        scheme: ``'absmax'`` (symmetric, codes in ``[-Q, Q]``) or ``'zeropoint'``
            (asymmetric, codes in ``[0, 2^b - 1]``).
        granularity: ``'tensor'``, ``'channel'`` (one scale per output row) or
            ``'group'`` (one scale per ``group_size`` inputs of a row).
        group_size: ``g`` for ``granularity='group'``; must divide ``in``.

    Returns:
        The codes, scales and zero-points.

    Raises:
        TypeError: if ``x`` is not a floating-point tensor.
        ValueError: if ``x`` is empty, ``bits`` is not 4 or 8, ``scheme`` or
            ``granularity`` is unknown, or ``group_size`` does not divide ``in``.
    """
    check_float_tensor("x", x)
    _check_bits(bits)
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    n_rows, n_groups, g = _grouped_shape(x.shape, granularity, group_size)
    xg = x.detach().float().reshape(n_rows, n_groups, g)  # (R, G, L)
    if scheme == "absmax":
        q_max = 2 ** (bits - 1) - 1  # 127 or 7: symmetric, -128 / -8 unused
        scale = xg.abs().amax(dim=-1) / q_max  # (R, G)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # all-zero group
        q = torch.round(xg / scale[..., None]).clamp(-q_max, q_max)
        return QuantizedTensor(
            q.to(torch.int8).reshape(x.shape), scale, None, bits, x.dtype
        )
    q_max = 2**bits - 1  # 255 or 15
    lo = xg.amin(dim=-1).clamp(max=0.0)  # (R, G), widened to contain 0
    hi = xg.amax(dim=-1).clamp(min=0.0)
    scale = (hi - lo) / q_max
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = torch.round(-lo / scale)  # in [0, q_max] since lo <= 0 <= hi
    q = (torch.round(xg / scale[..., None]) + zero[..., None]).clamp(0, q_max)
    return QuantizedTensor(
        q.to(torch.uint8).reshape(x.shape), scale, zero.to(torch.int32), bits, x.dtype
    )


def dequantize(qt: QuantizedTensor) -> Tensor:
    """Map codes back to floats: ``q s`` (absmax) or ``(q - z) s`` (zero-point).

    Args:
        qt: the result of :func:`quantize`.

    Returns:
        Tensor of the original shape and dtype.
    """
    n_rows, n_groups = qt.scale.shape
    qg = qt.q.float().reshape(n_rows, n_groups, -1)  # (R, G, L)
    if qt.zero is not None:
        qg = qg - qt.zero[..., None].float()
    return (qg * qt.scale[..., None]).reshape(qt.q.shape).to(qt.dtype)


def pack_int4(q: Tensor) -> Tensor:
    """Pack int4 codes two per byte: element ``2i`` in the low nibble, ``2i+1`` high.

    Args:
        q: int8 codes in ``[-8, 7]`` or uint8 codes in ``[0, 15]``, shape
            ``(..., n)`` with ``n`` even.

    Returns:
        uint8 tensor of shape ``(..., n / 2)``.

    Raises:
        TypeError: if ``q`` is not int8 or uint8.
        ValueError: if ``n`` is odd or a code is out of the 4-bit range.
    """
    if not isinstance(q, Tensor) or q.dtype not in (torch.int8, torch.uint8):
        raise TypeError(
            f"q must be an int8 or uint8 tensor, got {getattr(q, 'dtype', q)}"
        )
    if q.dim() == 0 or q.shape[-1] % 2:
        raise ValueError(f"q's last dimension must be even, got shape {tuple(q.shape)}")
    lo, hi = (-8, 7) if q.dtype == torch.int8 else (0, 15)
    if q.numel() and (q.min() < lo or q.max() > hi):
        raise ValueError(f"q's codes must lie in [{lo}, {hi}] to fit in 4 bits")
    nib = q.to(torch.int16) & 0xF  # two's-complement nibble of each code
    return (nib[..., 0::2] | (nib[..., 1::2] << 4)).to(torch.uint8)  # (..., n/2)


def unpack_int4(packed: Tensor, signed: bool = True) -> Tensor:
    """Inverse of :func:`pack_int4`.

    Args:
        packed: uint8 tensor ``(..., m)``.
        signed: True gives int8 codes in ``[-8, 7]``, False uint8 in ``[0, 15]``.

    Returns:
        Codes of shape ``(..., 2 m)``.

    Raises:
        TypeError: if ``packed`` is not uint8.
    """
    if not isinstance(packed, Tensor) or packed.dtype != torch.uint8:
        raise TypeError(
            f"packed must be a uint8 tensor, got {getattr(packed, 'dtype', packed)}"
        )
    p = packed.to(torch.int16)
    nib = torch.stack((p & 0xF, p >> 4), dim=-1).flatten(-2)  # (..., 2m)
    if signed:
        return torch.where(nib > 7, nib - 16, nib).to(torch.int8)
    return nib.to(torch.uint8)


class QuantizedLinear(nn.Module):
    """Weight-only quantized linear layer: ``y = x W_hat^T + b``, ``W_hat`` rebuilt.

    The weight lives as codes (int4 packed two per byte) plus scales; ``forward``
    dequantizes it to the input's dtype and calls ``F.linear``. Memory traffic for
    the weight shrinks 2x (int8) or 4x (int4) against bf16, which is what speeds up
    memory-bound decoding; the arithmetic stays in floating point.

    Args:
        weight: ``(out, in)`` float weight.
        bias: ``(out,)`` or None.
        bits, scheme, granularity, group_size: as in :func:`quantize`.

    Raises:
        ValueError: for int4 with an odd ``in`` (codes are packed in pairs), and as
            :func:`quantize`.
    """

    def __init__(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        bits: int = 8,
        scheme: str = "absmax",
        granularity: str = "channel",
        group_size: int | None = None,
    ) -> None:
        super().__init__()
        check_float_tensor("weight", weight)
        if weight.dim() != 2:
            raise ValueError(f"weight must be 2-D (out, in), got {tuple(weight.shape)}")
        if bits == 4 and weight.shape[1] % 2:
            raise ValueError(
                f"int4 packing needs an even in_features, got {weight.shape[1]}"
            )
        qt = quantize(weight, bits, scheme, granularity, group_size)
        self.out_features, self.in_features = weight.shape
        self.bits, self.scheme, self.dtype = bits, scheme, weight.dtype
        self.register_buffer("codes", pack_int4(qt.q) if bits == 4 else qt.q)
        self.register_buffer("scale", qt.scale)
        self.register_buffer("zero", qt.zero)
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    @classmethod
    def from_linear(cls, linear: nn.Linear, **kwargs: object) -> QuantizedLinear:
        """Quantize an ``nn.Linear``'s weight; ``kwargs`` go to the constructor."""
        return cls(linear.weight, linear.bias, **kwargs)  # type: ignore[arg-type]

    def dequantized_weight(self) -> Tensor:
        """The weight ``W_hat`` that ``forward`` multiplies by, ``(out, in)``."""
        q = self.codes
        if self.bits == 4:
            q = unpack_int4(q, signed=self.scheme == "absmax")  # (out, in)
        return dequantize(
            QuantizedTensor(q, self.scale, self.zero, self.bits, self.dtype)
        )

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., in) -> (..., out)``."""
        w_hat = self.dequantized_weight().to(x.dtype)  # (out, in)
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, w_hat, bias)
