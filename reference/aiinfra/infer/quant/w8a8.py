"""W8A8: weights and activations both in 8 bits, fp8 e4m3 or int8, by scale group.

A W8A8 matmul quantizes the activation ``X (N, in)`` and the weight ``W (out, in)``,
multiplies the 8-bit codes on 8-bit tensor cores and rescales the product. Three
ways to share scales, each the same for fp8 and int8 so that only the format
differs: one scale per tensor; one per token (row of X) and per output channel
(row of W); DeepSeek-V3's 1x128 tiles of X and 128x128 blocks of W
(:func:`aiinfra.precision.fp8.quantize_fp8` draws the fp8 groups). The matmul is
simulated in fp32 on the dequantized values, which is what the scaled 8-bit
product with an fp32 accumulator gives up to the accumulator's rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiinfra.precision.fp8 import block_amax, dequantize_fp8, quantize_fp8

FORMATS = ("fp8", "int8")
INT8_MAX = 127
TILE = 128  # DeepSeek-V3's tile and block edge

# Scale groups as (activation block, weight block); None: the whole tensor.
SCALINGS: dict[str, tuple[tuple[int, int] | None, tuple[int, int] | None]] = {
    "per tensor": (None, None),
    "per token / channel": ((1, -1), (1, -1)),
    "1x128 tiles / 128x128 blocks": ((1, TILE), (TILE, TILE)),
}


def fake_quantize(x: Tensor, fmt: str, block: tuple[int, int] | None) -> Tensor:
    """Round ``x`` to ``fmt`` with one absmax scale per block, and back to fp32.

    Args:
        x: (R, C) floating-point tensor.
        fmt: ``"fp8"`` (e4m3, scale amax / 448) or ``"int8"`` (scale amax / 127,
            round to nearest integer).
        block: (br, bc) sharing a scale, -1 for a whole axis; None: the tensor.

    Returns:
        (R, C) fp32 tensor of dequantized values.

    Raises:
        ValueError: ``fmt`` unknown or ``block`` does not tile ``x``.
        TypeError: ``x`` is not a 2-D floating-point tensor.
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    if fmt == "fp8":
        return dequantize_fp8(*quantize_fp8(x, block))
    # region int8
    amax = block_amax(x, block)  # (R/br, C/bc)
    sigma = amax.clamp(min=torch.finfo(torch.float32).tiny) / INT8_MAX
    full = sigma.repeat_interleave(x.shape[0] // sigma.shape[0], 0)
    full = full.repeat_interleave(x.shape[1] // sigma.shape[1], 1)  # (R, C)
    q = torch.round(x.float() / full).clamp(-INT8_MAX, INT8_MAX)  # int8 codes
    # endregion
    return q * full


def w8a8_matmul(x: Tensor, w: Tensor, fmt: str, scaling: str) -> Tensor:
    """``X W^T`` with both operands rounded to ``fmt`` under ``scaling``.

    Args:
        x: (N, in) activations.
        w: (out, in) weight.
        fmt: ``"fp8"`` or ``"int8"``.
        scaling: a key of :data:`SCALINGS`.

    Returns:
        (N, out) fp32 product of the dequantized operands.

    Raises:
        ValueError: unknown ``fmt`` or ``scaling``; ``x`` and ``w`` disagree on
            ``in``; a tile or block does not divide a dimension.
        TypeError: ``x`` or ``w`` is not a 2-D floating-point tensor.
    """
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {tuple(SCALINGS)}, got {scaling!r}")
    for name, t in (("x", x), ("w", w)):
        if not isinstance(t, Tensor) or not t.is_floating_point() or t.dim() != 2:
            raise TypeError(f"{name} must be a 2-D floating-point tensor")
    if x.shape[1] != w.shape[1]:
        raise ValueError(
            f"x (N, in) {tuple(x.shape)} and w (out, in) {tuple(w.shape)} must share in"
        )
    # region matmul
    act_block, weight_block = SCALINGS[scaling]
    x_hat = fake_quantize(x, fmt, act_block)  # (N, in)
    w_hat = fake_quantize(w, fmt, weight_block)  # (out, in)
    y = x_hat @ w_hat.T  # (N, out), fp32 accumulation
    # endregion
    return y


def w8a8_error(x: Tensor, w: Tensor, fmt: str, scaling: str) -> float:
    """Relative Frobenius error of :func:`w8a8_matmul` against ``X W^T`` in fp64.

    Raises:
        ValueError, TypeError: as :func:`w8a8_matmul`.
    """
    y_hat = w8a8_matmul(x, w, fmt, scaling).double()
    y = x.double() @ w.double().T  # (N, out)
    return ((y_hat - y).norm() / y.norm()).item()


class FakeW8A8Linear(nn.Module):
    """A linear layer whose weight and input are both rounded to ``fmt`` by blocks.

    The weight is rounded once, here; each input is rounded as it arrives (dynamic
    activation scales, as vLLM's FP8 W8A8 computes them per batch).

    Args:
        linear: the float layer.
        fmt: ``"fp8"`` or ``"int8"``.
        act_block: the activations' scale group, as :func:`fake_quantize` takes it.
        weight_block: the weight's scale group.

    Raises:
        ValueError: ``fmt`` unknown, or a block that does not tile the weight.
    """

    def __init__(
        self,
        linear: nn.Linear,
        fmt: str,
        act_block: tuple[int, int] | None,
        weight_block: tuple[int, int] | None,
    ) -> None:
        super().__init__()
        w_hat = fake_quantize(linear.weight.detach(), fmt, weight_block)  # (out, in)
        self.fmt, self.act_block = fmt, act_block
        self.register_buffer("weight", w_hat)
        b = linear.bias
        self.register_buffer("bias", None if b is None else b.detach().clone())

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., in) -> (..., out)``."""
        x2 = x.reshape(-1, x.shape[-1])  # (N, in): one row per token
        x_hat = fake_quantize(x2, self.fmt, self.act_block).reshape(x.shape)
        return nn.functional.linear(
            x_hat.to(x.dtype), self.weight.to(x.dtype), self.bias
        )
