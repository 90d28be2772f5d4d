"""AWQ: scale the weights' salient input channels up before rounding them.

A weight column that meets large activations matters more to the output than the
others. Activation-aware Weight Quantization (Lin et al. 2024, Sec. 3.2) protects it
without mixed precision: column ``j`` is multiplied by ``s_j > 1`` before
round-to-nearest and the input divided by ``s_j``, which shrinks that column's
rounding error relative to its size, since the group's scale barely moves. The
scales are ``s = s_X^alpha``, ``s_X`` the mean ``|X_j|`` over calibration tokens,
with ``alpha`` chosen on a grid to minimise the output error (Eq. 5)
``||Q(W diag(s)) (diag(s)^-1 X) - W X||``; ``alpha = 0`` is plain RTN, so the search
can only do as well or better on its calibration data. The authors' code also
normalises ``s`` by ``sqrt(max s min s)``, and quantizes group-wise with a zero-point
(group 128). The division by ``s`` folds into the previous operation as in
:mod:`aiinfra.infer.quant.smoothquant`; here the effective weight
``Q(W diag(s)) diag(s)^-1`` is returned. Notation: ``X`` ``(N, in)``, ``W``
``(out, in)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from aiinfra.infer.quant.rtn import check_float_tensor, dequantize, quantize
from aiinfra.infer.quant.smoothquant import check_scales, check_weights


@dataclass(frozen=True)
class AWQResult:
    """The chosen scales and the search behind them.

    Attributes:
        s: per-input-channel scales ``(in,)``.
        alpha: the chosen exponent.
        alphas: the grid searched.
        losses: mean squared output error at each grid point.
    """

    s: Tensor
    alpha: float
    alphas: tuple[float, ...]
    losses: tuple[float, ...]


def awq_weight(
    weight: Tensor,
    s: Tensor,
    bits: int = 4,
    scheme: str = "zeropoint",
    group_size: int | None = 128,
) -> Tensor:
    """The effective quantized weight ``Q(W diag(s)) diag(s)^-1``, ``(out, in)``.

    Args:
        weight: ``(out, in)``.
        s: scales ``(in,)``, all > 0; ones give RTN.
        bits: code width, 4 or 8.
        scheme: ``'absmax'`` or ``'zeropoint'`` (the authors' choice).
        group_size: inputs per scale; None for one scale per output row.

    Raises:
        TypeError: if ``weight`` or ``s`` is not a floating tensor.
        ValueError: for a wrong shape, a scale <= 0, or as ``quantize``.
    """
    check_float_tensor("weight", weight)
    check_scales(s, weight)
    gran = "channel" if group_size is None else "group"
    w_s = weight.detach() * s  # (out, in): salient columns made larger
    return dequantize(quantize(w_s, bits, scheme, gran, group_size)) / s


def awq_objective(
    x: Tensor,
    weights: Tensor | list[Tensor],
    s: Tensor,
    bits: int = 4,
    scheme: str = "zeropoint",
    group_size: int | None = 128,
) -> float:
    """Mean squared output error ``||X W^T - X W_hat^T||^2 / (N out)`` (Eq. 5).

    Args:
        x: calibration inputs ``(..., in)``.
        weights: the ``(out, in)`` weight(s) of the layers reading ``x``; they
            share ``s`` so that it folds into one previous operation.
        s: scales ``(in,)``, all > 0.
        bits: code width, 4 or 8.
        scheme: ``'absmax'`` or ``'zeropoint'``.
        group_size: inputs per scale; None for one scale per output row.

    Raises:
        TypeError, ValueError: as :func:`awq_weight`, or ``x`` mismatches.
    """
    ws = check_weights("x", x, weights)
    x2 = x.detach().reshape(-1, x.shape[-1])  # (N, in)
    err, count = 0.0, 0
    for w in ws:
        w_hat = awq_weight(w, s, bits, scheme, group_size)  # (out, in)
        err += float(((x2 @ (w.detach() - w_hat).T) ** 2).sum())
        count += x2.shape[0] * w.shape[0]
    return err / count


def awq_search(
    x: Tensor,
    weights: Tensor | list[Tensor],
    bits: int = 4,
    scheme: str = "zeropoint",
    group_size: int | None = 128,
    n_grid: int = 20,
) -> AWQResult:
    """Search ``alpha`` in ``{0, 1/n, ..., (n-1)/n}`` for ``s = s_X^alpha`` (Sec. 3.2).

    Args:
        x: calibration inputs ``(..., in)``.
        weights: the weight(s) that read ``x`` (one shared ``s``).
        bits: code width, 4 or 8.
        scheme: ``'absmax'`` or ``'zeropoint'``.
        group_size: inputs per scale; None for one scale per output row.
        n_grid: grid points; the authors use 20.

    Returns:
        The scales of least calibration error and the whole search.

    Raises:
        TypeError, ValueError: for bad tensors (as :func:`awq_objective`) or
            ``n_grid`` < 1.
    """
    ws = check_weights("x", x, weights)
    if not isinstance(n_grid, int) or n_grid < 1:
        raise ValueError(f"n_grid must be a positive integer, got {n_grid!r}")
    s_x = x.detach().reshape(-1, x.shape[-1]).abs().mean(dim=0)  # (in,)
    s_x = s_x.clamp(min=1e-4 * float(s_x.max().clamp(min=1e-12)))  # dead channels
    # region awq-grid
    alphas = tuple(k / n_grid for k in range(n_grid))
    best = (float("inf"), 0.0, torch.ones_like(s_x))
    losses = []
    for alpha in alphas:
        s = s_x.pow(alpha)  # (in,)
        s = s / (s.max() * s.min()).sqrt()  # the authors' normalisation
        loss = awq_objective(x, ws, s, bits, scheme, group_size)
        losses.append(loss)
        if loss < best[0]:
            best = (loss, alpha, s)
    # endregion
    return AWQResult(best[2], best[1], alphas, tuple(losses))
