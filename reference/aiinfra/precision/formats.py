"""Floating-point formats of deep learning, derived from ``torch.finfo``.

A binary floating-point number is a sign bit, w_e exponent bits and w_m mantissa
bits:
a normal value is (-1)^sign x 1.mantissa x 2^(exponent - bias), bias = 2^(w_e-1) - 1
(IEEE 754). w_m sets the precision, eps = 2^-w_m, the gap between 1 and the next number;
w_e sets the range, from the smallest normal 2^(1 - bias) to the largest finite
(2 - 2^-w_m) 2^bias. This file reads w_e and w_m back from what ``torch.finfo``
reports (``eps`` gives w_m, ``tiny`` gives the bias and so w_e) instead of typing
them. TF32, the
tensor-core format of NVIDIA Ampere and later, is not a storage dtype and has no
``finfo``: it keeps fp32's 8 exponent bits and fp16's 10 mantissa bits, and is
derived here from those two. FP8 comes in two flavours (Micikevicius et al. 2022):
E4M3 for weights and activations, E5M2 for gradients.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from aiinfra.report import Table

# The formats of the chapter, by their book names; None: not a torch dtype.
DTYPES: dict[str, torch.dtype | None] = {
    "fp32": torch.float32,
    "tf32": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp8 e4m3": torch.float8_e4m3fn,
    "fp8 e5m2": torch.float8_e5m2,
}


@dataclass(frozen=True)
class FloatFormat:
    """Bit layout and range of a binary floating-point format.

    Attributes:
        name: the book's name, e.g. ``"bf16"``.
        sign_bits, exponent_bits, mantissa_bits: the fields, 1 + w_e + w_m bits in all.
        bias: exponent bias, 2^(w_e-1) - 1.
        max: largest finite value.
        min_normal: smallest positive normal value, 2^(1 - bias).
        min_subnormal: smallest positive value, 2^(1 - bias - w_m).
        eps: gap between 1 and the next value, 2^-w_m.
    """

    name: str
    sign_bits: int
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max: float
    min_normal: float
    min_subnormal: float
    eps: float

    @property
    def bits(self) -> int:
        """Total width in bits."""
        return self.sign_bits + self.exponent_bits + self.mantissa_bits


def ieee_format(name: str, exponent_bits: int, mantissa_bits: int) -> FloatFormat:
    """The IEEE-754-style format with w_e exponent and w_m mantissa bits.

    The all-ones exponent is reserved for infinity and NaN, so the largest finite
    value is (2 - 2^-w_m) 2^bias.

    Args:
        name: a label.
        exponent_bits: w_e, at least 2.
        mantissa_bits: w_m, at least 1.

    Returns:
        Its layout and range.

    Raises:
        ValueError: w_e < 2 or w_m < 1.
    """
    if exponent_bits < 2 or mantissa_bits < 1:
        raise ValueError("need exponent_bits >= 2 and mantissa_bits >= 1")
    bias = 2 ** (exponent_bits - 1) - 1
    return FloatFormat(
        name=name,
        sign_bits=1,
        exponent_bits=exponent_bits,
        mantissa_bits=mantissa_bits,
        bias=bias,
        max=(2 - 2.0**-mantissa_bits) * 2.0**bias,
        min_normal=2.0 ** (1 - bias),
        min_subnormal=2.0 ** (1 - bias - mantissa_bits),
        eps=2.0**-mantissa_bits,
    )


def finfo_format(name: str, dtype: torch.dtype) -> FloatFormat:
    """Derive a dtype's bit layout from ``torch.finfo`` (nothing typed in).

    Args:
        name: a label.
        dtype: a floating-point torch dtype.

    Returns:
        Its layout; ``max`` is finfo's, which for ``float8_e4m3fn`` (no infinities,
        only one NaN pattern) is 448, above the IEEE rule's 240.

    Raises:
        TypeError: ``dtype`` is not a floating-point dtype.
    """
    if not dtype.is_floating_point:
        raise TypeError(f"{dtype} is not a floating-point dtype")
    # region derive
    fi = torch.finfo(dtype)
    mantissa = round(-math.log2(fi.eps))  # eps = 2^-w_m
    bias = 1 - round(math.log2(fi.tiny))  # smallest normal = 2^(1 - bias)
    exponent = round(math.log2(bias + 1)) + 1  # bias = 2^(w_e-1) - 1
    layout = FloatFormat(
        name=name,
        sign_bits=fi.bits - exponent - mantissa,
        exponent_bits=exponent,
        mantissa_bits=mantissa,
        bias=bias,
        max=fi.max,
        min_normal=fi.tiny,
        min_subnormal=fi.tiny * fi.eps,
        eps=fi.eps,
    )
    # endregion
    return layout


def float_format(name: str) -> FloatFormat:
    """The format of a book name in :data:`DTYPES` (``"tf32"`` derived, see module).

    Args:
        name: ``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"``, ``"fp8 e4m3"`` or
            ``"fp8 e5m2"``.

    Returns:
        Its layout and range.

    Raises:
        ValueError: an unknown name.
    """
    if name not in DTYPES:
        raise ValueError(f"unknown format {name!r}; known: {list(DTYPES)}")
    if name == "tf32":  # fp32's exponent, fp16's mantissa
        fp32, fp16 = (
            finfo_format("fp32", torch.float32),
            finfo_format("", torch.float16),
        )
        return ieee_format("tf32", fp32.exponent_bits, fp16.mantissa_bits)
    return finfo_format(name, DTYPES[name])


def to_tf32(x: torch.Tensor) -> torch.Tensor:
    """Round fp32 values to TF32 precision (10 mantissa bits), nearest-even.

    Args:
        x: an fp32 tensor.

    Returns:
        fp32 tensor whose low 13 mantissa bits are zero.

    Raises:
        TypeError: ``x`` is not fp32.
    """
    if x.dtype != torch.float32:
        raise TypeError(f"to_tf32 expects float32, got {x.dtype}")
    bits = x.view(torch.int32)
    drop = 23 - float_format("tf32").mantissa_bits  # 13 bits fall away
    lsb = (bits >> drop) & 1  # ties go to the even neighbour
    rounded = (bits + (1 << (drop - 1)) - 1 + lsb) & ~((1 << drop) - 1)
    return rounded.view(torch.float32)


def formats_table() -> Table:
    """Bit layout, range and precision of every format in :data:`DTYPES`."""
    rows = []
    for name in DTYPES:
        f = float_format(name)
        fields = f"{f.sign_bits}/{f.exponent_bits}/{f.mantissa_bits}"
        rows.append([name, f.bits, fields, f.max, f.min_normal, f.min_subnormal, f.eps])
    return Table(
        columns=[
            "format",
            "bits",
            "sign/exp/mantissa",
            "max",
            "min normal",
            "min subnormal",
            "eps",
        ],
        rows=rows,
        note="From torch.finfo; tf32 derived as fp32's exponent and fp16's mantissa.",
    )
