"""FlashAttention in plain PyTorch: tiled forward and backward, memory linear in T.

Standard attention (Dao et al. 2022, Alg. 0) forms ``S = Q K^T`` and
``P = softmax(S)``, two ``T x T`` matrices per head, and autograd keeps ``P`` for the
backward pass. FlashAttention computes the same output block by block: a block of
``B_r`` queries meets the keys in blocks of ``B_c``, and the online softmax (running
maximum ``m_i``, running sum ``l_i``, rescaled accumulator ``acc``) turns the partial
results into the exact softmax-weighted sum. Only the output ``O`` and the
log-sum-exp ``lse = m + log l`` per row are kept (FlashAttention-2, Dao 2023, Alg. 1);
the backward pass (Alg. 2) recomputes each block of ``P = exp(S - lse)`` instead of
reading it from memory. On a GPU the blocks live in SRAM, which is where the speed
comes from; here the loops are in Python and the point is the algorithm and its
``O(T)`` memory. Notation (the book's): ``B`` batch, ``H`` heads, ``T`` positions (the
local ``N``), ``d`` head dim.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor


def standard_attention(
    q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float | None = None
) -> Tensor:
    """Attention that materializes the ``T x T`` scores (Alg. 0), the baseline.

    Args:
        q: queries, shape ``(B, H, T, d)``.
        k: keys, the same shape.
        v: values, the same shape.
        causal: mask key ``j > i`` for query ``i``.
        scale: default ``1 / sqrt(d)``.

    Returns:
        ``softmax(q k^T scale) v``, shape ``(B, H, T, d)``.
    """
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-1, -2) * scale  # (B, H, T, T)
    if causal:
        N = q.shape[-2]
        s = s.masked_fill(
            torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1), float("-inf")
        )
    p = torch.softmax(s, dim=-1)  # (B, H, T, T)
    return p @ v  # (B, H, T, d)


def _causal_mask(
    i0: int, rows: int, j0: int, cols: int, device: torch.device
) -> Tensor:
    """``True`` where key ``j0 + c`` lies after query ``i0 + r``: (rows, cols)."""
    key_pos = torch.arange(j0, j0 + cols, device=device)
    return key_pos > torch.arange(i0, i0 + rows, device=device)[:, None]


def _acc_dtype(x: Tensor) -> torch.dtype:
    """Accumulate in fp32, as GPU kernels do (fp64 stays fp64, for gradcheck)."""
    return torch.promote_types(x.dtype, torch.float32)


def tiled_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool,
    scale: float,
    block_q: int,
    block_k: int,
) -> tuple[Tensor, Tensor]:
    """FlashAttention-2 forward: ``O`` and the log-sum-exp ``lse``, accumulated in fp32.

    Args:
        q: queries, shape ``(B, H, T, d)``.
        k: keys, the same shape.
        v: values, the same shape.
        causal: skip key blocks after the query block, mask the diagonal ones.
        scale: score scale.
        block_q: ``B_r``, queries per block.
        block_k: ``B_c``, keys per block.

    Returns:
        ``O`` of shape ``(B, H, T, d)`` and ``lse`` of shape ``(B, H, T)``.
    """
    B, H, N, d = q.shape
    wide = _acc_dtype(q)  # fp32 (fp64 for fp64 inputs)
    f32 = {"dtype": wide, "device": q.device}
    o = torch.empty(B, H, N, d, **f32)  # (B, H, T, d)
    lse = torch.empty(B, H, N, **f32)  # (B, H, T)
    # region query-block
    for i0 in range(0, N, block_q):
        q_i = q[:, :, i0 : i0 + block_q].to(wide)  # (B, H, B_r, d)
        rows = q_i.shape[2]
        m_i = torch.full((B, H, rows), -math.inf, **f32)  # running max
        l_i = torch.zeros(B, H, rows, **f32)  # running sum of exp(s - m_i)
        acc = torch.zeros(B, H, rows, d, **f32)  # running sum of exp(s - m_i) v
        # endregion
        # region key-blocks
        for j0 in range(0, i0 + rows if causal else N, block_k):
            k_j = k[:, :, j0 : j0 + block_k].to(wide)  # (B, H, B_c, d)
            v_j = v[:, :, j0 : j0 + block_k].to(wide)  # (B, H, B_c, d)
            cols = k_j.shape[2]
            s = q_i @ k_j.transpose(-1, -2) * scale  # (B, H, B_r, B_c)
            if causal and j0 + cols - 1 > i0:  # block crosses the diagonal
                s = s.masked_fill(_causal_mask(i0, rows, j0, cols, q.device), -math.inf)
            m_new = torch.maximum(m_i, s.amax(dim=-1))  # (B, H, B_r)
            p = torch.exp(s - m_new.unsqueeze(-1))  # (B, H, B_r, B_c)
            alpha = torch.exp(m_i - m_new)  # rescales what was summed so far
            l_i = alpha * l_i + p.sum(dim=-1)
            acc = alpha.unsqueeze(-1) * acc + p @ v_j  # (B, H, B_r, d)
            m_i = m_new
        o[:, :, i0 : i0 + rows] = acc / l_i.unsqueeze(-1)
        lse[:, :, i0 : i0 + rows] = m_i + torch.log(l_i)
        # endregion
    return o, lse


def tiled_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    lse: Tensor,
    do: Tensor,
    causal: bool,
    scale: float,
    block_q: int,
    block_k: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """FlashAttention-2 backward: recompute ``P`` from ``lse``, never store it.

    Args:
        q: queries, shape ``(B, H, T, d)``.
        k: keys, the same shape.
        v: values, the same shape.
        o: the forward output, the same shape.
        do: the gradient of ``o``, the same shape.
        lse: ``lse`` of the forward pass, shape ``(B, H, T)``.
        causal: as in :func:`tiled_forward`.
        scale: as in :func:`tiled_forward`.
        block_q: as in :func:`tiled_forward`.
        block_k: as in :func:`tiled_forward`.

    Returns:
        ``dq, dk, dv`` in fp32, each of shape ``(B, H, T, d)``.
    """
    N = q.shape[2]
    wide = _acc_dtype(q)  # fp32 (fp64 for fp64 inputs)
    f32 = {"dtype": wide, "device": q.device}
    delta = (do.to(wide) * o.to(wide)).sum(dim=-1)  # D_i, (B, H, T)
    dq = torch.zeros(q.shape, **f32)  # accumulated over key blocks
    dk, dv = torch.zeros(k.shape, **f32), torch.zeros(v.shape, **f32)
    for j0 in range(0, N, block_k):  # outer loop over keys: dK_j, dV_j stay local
        k_j = k[:, :, j0 : j0 + block_k].to(wide)  # (B, H, B_c, d)
        v_j = v[:, :, j0 : j0 + block_k].to(wide)  # (B, H, B_c, d)
        cols = k_j.shape[2]
        dk_j, dv_j = torch.zeros_like(k_j), torch.zeros_like(v_j)
        for i0 in range(j0 // block_q * block_q if causal else 0, N, block_q):
            q_i = q[:, :, i0 : i0 + block_q].to(wide)  # (B, H, B_r, d)
            do_i = do[:, :, i0 : i0 + block_q].to(wide)  # (B, H, B_r, d)
            rows = q_i.shape[2]
            s = q_i @ k_j.transpose(-1, -2) * scale  # (B, H, B_r, B_c)
            if causal and j0 + cols - 1 > i0:
                s = s.masked_fill(_causal_mask(i0, rows, j0, cols, q.device), -math.inf)
            p = torch.exp(s - lse[:, :, i0 : i0 + rows].unsqueeze(-1))  # recomputed P
            dv_j += p.transpose(-1, -2) @ do_i  # (B, H, B_c, d)
            dp = do_i @ v_j.transpose(-1, -2)  # (B, H, B_r, B_c)
            ds = p * (dp - delta[:, :, i0 : i0 + rows].unsqueeze(-1))  # softmax grad
            dq[:, :, i0 : i0 + rows] += ds @ k_j * scale  # (B, H, B_r, d)
            dk_j += ds.transpose(-1, -2) @ q_i * scale  # (B, H, B_c, d)
        dk[:, :, j0 : j0 + cols], dv[:, :, j0 : j0 + cols] = dk_j, dv_j
    return dq, dk, dv


class FlashAttention(torch.autograd.Function):
    """Tiled attention whose backward recomputes ``P`` from the saved log-sum-exp.

    Saved for backward: ``q, k, v, O`` and ``lse``, ``O(T d)`` numbers per head,
    against the ``O(T^2)`` of :func:`standard_attention`.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        causal: bool,
        scale: float,
        block_q: int,
        block_k: int,
    ) -> Tensor:
        """Tiled forward; saves ``q, k, v, O, lse``. Shapes as :func:`tiled_forward`."""
        o, lse = tiled_forward(q, k, v, causal, scale, block_q, block_k)
        o = o.to(q.dtype)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.args = (causal, scale, block_q, block_k)
        return o

    @staticmethod
    def backward(ctx: Any, do: Tensor) -> tuple[Tensor | None, ...]:
        """Gradients of ``q, k, v`` (none for the options), recomputing ``P``."""
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = tiled_backward(q, k, v, o, lse, do, *ctx.args)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None


def check_attention_inputs(q: Tensor, k: Tensor, v: Tensor) -> None:
    """Raise ``ValueError`` unless q, k, v are floating ``(B, H, T, d)`` of one shape.

    Raises:
        ValueError: wrong rank, mismatched shapes (e.g. head dims), or dtypes.
    """
    if q.dim() != 4:
        raise ValueError(f"q must be (B, H, T, d), got shape {tuple(q.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            f"q, k, v must have the same shape (B, H, T, d); got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if not q.is_floating_point() or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(
            f"q, k, v must share a float dtype: {q.dtype}, {k.dtype}, {v.dtype}"
        )


def flash_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
) -> Tensor:
    """Exact attention computed in tiles (FlashAttention-2), differentiable.

    Args:
        q: queries, shape ``(B, H, T, d)``, on any device (the loops are in
            Python).
        k: keys, the same shape.
        v: values, the same shape.
        causal: mask key ``j > i`` for query ``i``.
        scale: default ``1 / sqrt(d)``.
        block_q: ``B_r``; need not divide ``T``.
        block_k: ``B_c``; need not divide ``T``.

    Returns:
        Shape ``(B, H, T, d)``, dtype of ``q``.

    Raises:
        ValueError: bad shapes or dtypes (see :func:`check_attention_inputs`), or a
            block size < 1.
    """
    check_attention_inputs(q, k, v)
    for name, b in (("block_q", block_q), ("block_k", block_k)):
        if not isinstance(b, int) or b < 1:
            raise ValueError(f"{name} must be a positive integer, got {b!r}")
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    return FlashAttention.apply(q, k, v, causal, scale, block_q, block_k)
