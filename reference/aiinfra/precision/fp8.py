"""FP8 scaling: one scale per tensor, per 1x128 tile or per 128x128 block.

E4M3 keeps 3 mantissa bits and stops at 448, so a tensor is multiplied into that
range before the cast and the scale is kept beside it: x ~ sigma q, with q in fp8
and sigma = amax / 448 in fp32 (the dequantisation scale). One scale for the whole
tensor lets a few outlier channels set it, and pushes the ordinary values down
towards E4M3's subnormals, where the relative precision is lost. DeepSeek-V3
(DeepSeek-AI 2024, Sec. 3.3.2) gives each 1x128 tile of an activation (one token,
128 channels) and each 128x128 block of a weight its own scale, so an outlier only
coarsens its own group. Transformer Engine's delayed scaling instead takes amax from
a history of earlier steps (:class:`DelayedScaler`); current scaling takes it from
the tensor being cast, as here.
"""

from __future__ import annotations

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = torch.finfo(E4M3).max  # 448: E4M3 "fn" has no infinity

# Groups that share one scale, as (rows, columns); None: the whole tensor.
GRANULARITIES: dict[str, tuple[int, int] | None] = {
    "per tensor": None,
    "per token (1 x C)": (1, -1),
    "128x128 block": (128, 128),
    "1x128 tile": (1, 128),
}


def _block_shape(x: torch.Tensor, block: tuple[int, int] | None) -> tuple[int, int]:
    """Check ``x`` and resolve ``block`` (None: whole tensor; -1: a whole axis)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() != 2:
        raise TypeError("x must be a 2-D floating-point tensor")
    if block is None:
        return tuple(x.shape)
    br, bc = (n if b == -1 else b for b, n in zip(block, x.shape, strict=True))
    if br < 1 or bc < 1 or x.shape[0] % br or x.shape[1] % bc:
        raise ValueError(
            f"block {block} must tile x of shape {tuple(x.shape)}: positive sizes "
            "(or -1 for a whole axis) dividing each dimension"
        )
    return br, bc


def block_amax(x: torch.Tensor, block: tuple[int, int] | None) -> torch.Tensor:
    """Largest magnitude of each block.

    Args:
        x: (R, C) tensor.
        block: (br, bc) dividing (R, C), -1 for a whole axis; None: one block.

    Returns:
        (R / br, C / bc) fp32 tensor of amax values.

    Raises:
        TypeError: ``x`` is not a 2-D floating-point tensor.
        ValueError: ``block`` does not tile ``x``.
    """
    br, bc = _block_shape(x, block)
    r, c = x.shape
    blocks = x.float().abs().reshape(r // br, br, c // bc, bc)  # (R/br, br, C/bc, bc)
    return blocks.amax(dim=(1, 3))  # (R/br, C/bc)


def _expand(scale: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Repeat one scale per block over its block's elements."""
    br, bc = shape[0] // scale.shape[0], shape[1] // scale.shape[1]
    return scale.repeat_interleave(br, 0).repeat_interleave(bc, 1)  # (R, C)


def quantize_fp8(
    x: torch.Tensor, block: tuple[int, int] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast to E4M3 with one scale per block from the block's own amax.

    Args:
        x: (R, C) floating-point tensor.
        block: (br, bc) sharing a scale, e.g. (1, 128) or (128, 128); -1 spans an
            axis; None: one scale for the tensor (per-tensor current scaling).

    Returns:
        ``(q, sigma)``: q (R, C) in ``float8_e4m3fn`` and sigma (R / br, C / bc) in
        fp32, with x ~ sigma q blockwise.

    Raises:
        TypeError: ``x`` is not a 2-D floating-point tensor.
        ValueError: ``block`` does not tile ``x``.
    """
    # region quantize
    amax = block_amax(x, block)  # (R/br, C/bc)
    sigma = amax.clamp(min=torch.finfo(torch.float32).tiny) / E4M3_MAX
    scaled = x.float() / _expand(sigma, x.shape)  # (R, C), |.| <= 448
    q = scaled.clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)  # round to nearest even
    # endregion
    return q, sigma


def dequantize_fp8(q: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Undo :func:`quantize_fp8`: ``sigma q`` blockwise, in fp32.

    Args:
        q: (R, C) ``float8_e4m3fn`` tensor.
        sigma: (R / br, C / bc) fp32 scales.

    Returns:
        (R, C) fp32 tensor.

    Raises:
        ValueError: ``sigma``'s shape does not divide ``q``'s.
    """
    if (
        q.dim() != 2
        or sigma.dim() != 2
        or any(n % m for n, m in zip(q.shape, sigma.shape, strict=True))
    ):
        raise ValueError(
            f"sigma of shape {tuple(sigma.shape)} must divide q of shape "
            f"{tuple(q.shape)}, both 2-D"
        )
    return q.float() * _expand(sigma, q.shape)


def relative_error(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """Frobenius relative error ``||x - x_hat|| / ||x||``.

    Raises:
        ValueError: shapes differ or ``x`` is zero.
    """
    if x.shape != x_hat.shape:
        raise ValueError(f"x {tuple(x.shape)} and x_hat {tuple(x_hat.shape)} differ")
    norm = x.double().norm()
    if norm == 0:
        raise ValueError("x must not be all zeros")
    return ((x.double() - x_hat.double()).norm() / norm).item()


class DelayedScaler:
    """Per-tensor delayed scaling (Transformer Engine's ``DelayedScaling``).

    The scale of step t comes from the largest amax of the previous
    ``history_len`` steps, so the cast needs no pass over the tensor first; a
    tensor that grows faster than its history saturates at 448.

    Args:
        history_len: steps of amax kept (Transformer Engine's default is 1024).

    Raises:
        ValueError: ``history_len < 1``.
    """

    def __init__(self, history_len: int = 16) -> None:
        if history_len < 1:
            raise ValueError(f"history_len must be >= 1, got {history_len}")
        self.history_len = history_len
        self.history: list[float] = []

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cast ``x`` with the scale from history, then record its amax.

        Args:
            x: (R, C) floating-point tensor.

        Returns:
            ``(q, sigma)`` as :func:`quantize_fp8` with one (1, 1) scale; the first
            step, with no history, uses the current amax.
        """
        amax = block_amax(x, None)  # (1, 1)
        past = max(self.history) if self.history else amax.item()
        sigma = torch.tensor([[max(past, 1e-30) / E4M3_MAX]])  # (1, 1)
        q = (x.float() / sigma).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
        self.history = (self.history + [amax.item()])[-self.history_len :]
        return q, sigma
