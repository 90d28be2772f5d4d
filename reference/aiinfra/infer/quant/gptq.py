"""GPTQ: quantize a weight column by column, pushing each rounding error forward.

Round-to-nearest (:mod:`aiinfra.infer.quant.rtn`) rounds every weight on its own. GPTQ
(Frantar et al. 2022, Algorithm 1) minimises the layer's output error on calibration
inputs instead, ``||X W^T - X W_hat^T||^2``, whose curvature in each row of ``W`` is
the Hessian ``H = 2 X^T X`` (``in x in``), the same for all rows. It quantizes the
input columns one at a time; the error ``(w_j - q_j) / [H^-1]_jj`` of column ``j``
is spread over the columns not yet quantized through row ``j`` of the upper Cholesky
factor of ``H^-1`` (Optimal Brain Quantization's update, Frantar & Alistarh 2022),
so later columns absorb what earlier ones lost. The updates are applied lazily, a
block of ``block_size`` columns at a time, which changes nothing but speed. The
rounding grid is that of RTN, one scale per output row or per ``group_size``
inputs, computed from the updated weights when a group starts (the authors' code
skips the block's pending updates there, which makes it depend on the block size).
Damping adds
``percdamp`` times the mean diagonal to ``H``. Notation: ``X`` ``(N, in)``
calibration inputs, ``W`` ``(out, in)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiinfra.infer.quant.rtn import (
    SCHEMES,
    QuantizedTensor,
    _check_bits,
    check_float_tensor,
    quantize,
)

PERCDAMP = 0.01  # the authors' default damping, a fraction of the mean diag(H)


def gptq_hessian(x: Tensor) -> Tensor:
    """The layer-wise Hessian ``H = 2 X^T X`` of the output error, in float64.

    Args:
        x: calibration inputs ``(..., in)``; all leading dimensions are samples.

    Returns:
        ``(in, in)`` float64 tensor.

    Raises:
        TypeError: if ``x`` is not a floating tensor.
        ValueError: if ``x`` is empty.
    """
    check_float_tensor("x", x)
    x2 = x.detach().reshape(-1, x.shape[-1]).double()  # (N, in)
    return 2 * x2.T @ x2  # (in, in)


def _round_column(
    w: Tensor, scale: Tensor, zero: Tensor | None, bits: int
) -> tuple[Tensor, Tensor]:
    """Codes and dequantized values of one column ``w (out,)`` on a fixed grid."""
    if zero is None:
        q_max = 2 ** (bits - 1) - 1
        q = torch.round(w / scale).clamp(-q_max, q_max)  # (out,)
        return q, q * scale
    q = (torch.round(w / scale) + zero).clamp(0, 2**bits - 1)  # (out,)
    return q, (q - zero) * scale


def gptq_quantize(
    weight: Tensor,
    hessian: Tensor,
    bits: int = 4,
    scheme: str = "absmax",
    group_size: int | None = None,
    block_size: int = 128,
    percdamp: float = PERCDAMP,
) -> QuantizedTensor:
    """GPTQ (Frantar et al. 2022, Algorithm 1) of one linear layer's weight.

    Args:
        weight: ``(out, in)`` float weight.
        hessian: ``(in, in)`` from :func:`gptq_hessian` of the layer's inputs.
        bits: code width, 4 or 8.
        scheme: ``'absmax'`` or ``'zeropoint'``, as in
            :func:`~aiinfra.infer.quant.rtn.quantize`.
        group_size: inputs that share a scale; None for one scale per output row.
        block_size: columns whose updates are applied together (lazy batch).
        percdamp: damping ``lambda`` as a fraction of the mean of ``diag(H)``;
            0 is allowed when ``H`` is positive definite.

    Returns:
        Codes and scales in the layout of :func:`~aiinfra.infer.quant.rtn.quantize`
        (``dequantize`` gives ``W_hat``).

    Raises:
        TypeError: if ``weight`` or ``hessian`` is not a floating tensor.
        ValueError: for a wrong shape, ``bits``, ``scheme``, ``group_size`` that does
            not divide ``in``, ``block_size`` < 1, ``percdamp`` < 0, or an ``H``
            that is not positive definite after damping.
    """
    check_float_tensor("weight", weight)
    check_float_tensor("hessian", hessian)
    _check_bits(bits)
    if weight.dim() != 2:
        raise ValueError(f"weight must be 2-D (out, in), got {tuple(weight.shape)}")
    n_out, n_in = weight.shape
    if hessian.shape != (n_in, n_in):
        raise ValueError(
            f"hessian must be (in, in) = ({n_in}, {n_in}), got {tuple(hessian.shape)}"
        )
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    g = n_in if group_size is None else group_size
    if not isinstance(g, int) or g <= 0 or n_in % g:
        raise ValueError(
            f"group_size must be a positive integer dividing in = {n_in}, got "
            f"{group_size!r}"
        )
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    if not percdamp >= 0:
        raise ValueError(f"percdamp must be >= 0, got {percdamp!r}")

    W = weight.detach().double().clone()  # (out, in), updated in place
    H = hessian.detach().double().clone()  # (in, in)
    dead = torch.diagonal(H) == 0  # inputs never active: their weights do not matter
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    H += percdamp * torch.diagonal(H).mean() * torch.eye(n_in, dtype=H.dtype)
    L, info = torch.linalg.cholesky_ex(H)
    if info:
        raise ValueError("hessian must be positive definite after damping")
    # Upper Cholesky factor of H^-1: row j holds the OBQ update of column j.
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(L), upper=True)  # (in, in)

    Q = torch.zeros_like(W)  # (out, in) codes
    scales = torch.zeros(n_out, n_in // g, dtype=torch.float64)  # (out, in / g)
    zeros = torch.zeros(n_out, n_in // g, dtype=torch.float64)
    scale = zero = None
    # region gptq-loop
    for i1 in range(0, n_in, block_size):
        i2 = min(i1 + block_size, n_in)
        W1 = W[:, i1:i2].clone()  # (out, b): this block, updated column by column
        Err1 = torch.zeros_like(W1)  # (out, b): scaled errors for the lazy update
        Hinv1 = Hinv[i1:i2, i1:i2]  # (b, b)
        for i in range(i2 - i1):
            j = i1 + i
            if j % g == 0:  # a new group: its grid from the weights updated so far
                pending = Err1[:, :i] @ Hinv[i1:j, i2 : j + g]  # lazy part past i2
                cols = torch.cat((W1[:, i : i + g], W[:, i2 : j + g] - pending), 1)
                qt = quantize(cols, bits, scheme, "channel")
                scale = qt.scale[:, 0].double()  # (out,)
                zero = None if qt.zero is None else qt.zero[:, 0].double()
                scales[:, j // g] = scale
                zeros[:, j // g] = 0.0 if zero is None else zero
            w = W1[:, i]  # (out,)
            Q[:, j], w_hat = _round_column(w, scale, zero, bits)
            err = (w - w_hat) / Hinv1[i, i]  # (out,)
            W1[:, i:] -= err[:, None] * Hinv1[i, i:][None, :]  # OBQ update
            Err1[:, i] = err
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]  # the block's updates, all at once
    # endregion
    codes = Q.to(torch.int8 if scheme == "absmax" else torch.uint8)
    zero_out = None if scheme == "absmax" else zeros.to(torch.int32)
    return QuantizedTensor(codes, scales.float(), zero_out, bits, weight.dtype)
