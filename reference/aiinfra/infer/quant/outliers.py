"""LLM.int8: vector-wise int8 matmul with the outlier features kept in high precision.

Dettmers et al. 2022 (LLM.int8(), Sec. 3) quantize a matmul ``Y = X W^T`` with
``X (N, K)`` and ``W (M, K)`` *vector-wise*: each row ``i`` of ``X`` gets its own absmax
scale ``c_x[i] = max_k |X_ik| / 127`` and each output ``j`` of ``W`` (a column of the
paper's ``W (K, M)``) gets ``c_w[j]``; the int8 product accumulated in int32 is
rescaled by the outer product, ``Y_ij ~ c_x[i] c_w[j] sum_k q_x[i,k] q_w[j,k]``
(their Eq. 3). Large models grow a few hidden dimensions (*outlier features*) whose
magnitude reaches 20x the rest; one of them in a row inflates that row's scale and
rounds every other element of the row to a few levels. The *mixed-precision
decomposition* (their Eq. 4) takes the columns ``O = {k : max_i |X_ik| > alpha}``,
``alpha = 6.0``, out of the int8 product and multiplies them in the input's floating
dtype: ``Y = X_O W_O^T + int8(X_~O, W_~O)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiinfra.infer.quant.rtn import check_float_tensor

OUTLIER_THRESHOLD = 6.0  # alpha of LLM.int8 (Dettmers et al. 2022, Sec. 3.2)


def _check_matmul(x: Tensor, w: Tensor) -> None:
    check_float_tensor("x", x)
    check_float_tensor("w", w)
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(
            f"x (N, K) and w (M, K) must be 2-D with the same K, got x "
            f"{tuple(x.shape)} and w {tuple(w.shape)}"
        )


def _rowwise_int8(a: Tensor) -> tuple[Tensor, Tensor]:
    """Absmax int8 codes of each row of ``a (R, K)`` and the scales ``(R,)``."""
    c = a.float().abs().amax(dim=1) / 127  # (R,)
    c = torch.where(c > 0, c, torch.ones_like(c))  # an all-zero row stays zero
    q = torch.round(a.float() / c[:, None]).clamp(-127, 127).to(torch.int8)  # (R, K)
    return q, c


def vectorwise_int8_matmul(x: Tensor, w: Tensor) -> Tensor:
    """``x w^T`` through int8 with row-wise scales for ``x``, output-wise for ``w``.

    Args:
        x: ``(N, K)`` floating input.
        w: ``(M, K)`` floating weight (``nn.Linear`` layout).

    Returns:
        ``(N, M)`` in ``x``'s dtype.

    Raises:
        TypeError: if ``x`` or ``w`` is not floating-point.
        ValueError: if either is empty or the shapes do not match.
    """
    _check_matmul(x, w)
    q_x, c_x = _rowwise_int8(x)  # (N, K), (N,)
    q_w, c_w = _rowwise_int8(w)  # (M, K), (M,)
    acc = q_x.to(torch.int32) @ q_w.to(torch.int32).T  # (N, M), exact int32 sum
    return (acc.float() * c_x[:, None] * c_w[None, :]).to(x.dtype)  # (N, M)


def outlier_columns(x: Tensor, threshold: float = OUTLIER_THRESHOLD) -> Tensor:
    """Mask of the feature columns of ``x (N, K)`` holding a value above ``threshold``.

    Args:
        x: ``(N, K)`` floating input.
        threshold: ``alpha``; a column ``k`` is an outlier if ``max_i |x_ik| > alpha``.

    Returns:
        Boolean mask ``(K,)``.

    Raises:
        ValueError: if ``threshold`` is negative.
    """
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    return x.abs().amax(dim=0) > threshold  # (K,)


def llm_int8_matmul(
    x: Tensor, w: Tensor, threshold: float = OUTLIER_THRESHOLD
) -> Tensor:
    """LLM.int8 product ``x w^T``: outlier columns in float, the rest vector-wise int8.

    Args:
        x: ``(..., K)`` floating input (leading dimensions are flattened into rows).
        w: ``(M, K)`` floating weight (``nn.Linear`` layout).
        threshold: outlier threshold ``alpha`` (6.0 in the paper).

    Returns:
        ``(..., M)`` in ``x``'s dtype.

    Raises:
        TypeError: if ``x`` or ``w`` is not floating-point.
        ValueError: if either is empty, the ``K`` differ, or ``threshold < 0``.
    """
    check_float_tensor("x", x)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])  # (N, K)
    _check_matmul(x2, w)
    outliers = outlier_columns(x2, threshold)  # (K,)
    y = torch.zeros(x2.shape[0], w.shape[0], dtype=x.dtype, device=x.device)  # (N, M)
    if outliers.any():  # X_O W_O^T in the input's precision
        y = y + x2[:, outliers] @ w[:, outliers].to(x.dtype).T
    if not outliers.all():  # the regular features through int8
        y = y + vectorwise_int8_matmul(x2[:, ~outliers], w[:, ~outliers])
    return y.reshape(*lead, w.shape[0])  # (..., M)
