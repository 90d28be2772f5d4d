"""FlashAttention-2's backward pass in Triton, and the differentiable kernel.

The backward pass (Dao 2023, FlashAttention-2, Alg. 2) needs ``P`` again but never
stored it: each block is recomputed from the saved log-sum-exp,
``P_ij = exp(S_ij - lse_i)``. With ``D_i = rowsum(dO_i * O_i)`` the gradients are
``dV_j = sum_i P_ij^T dO_i``, ``dS_ij = P_ij * (dO_i V_j^T - D_i)``,
``dK_j = scale sum_i dS_ij^T Q_i`` and ``dQ_i = scale sum_j dS_ij K_j``. As in
Triton's fused-attention tutorial, two kernels avoid atomic adds: one program per
key block accumulates ``dK_j, dV_j`` over the query blocks, and one program per
query block accumulates ``dQ_i`` over the key blocks, recomputing ``P`` once more.
``D`` is one line of PyTorch. Like the forward kernel, on the CPU (interpreter)
the tiles are cast to fp32 and the results are rounded by PyTorch.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from aiinfra.models.flash.triton_forward import (
    HAS_TRITON,
    flash_attention_triton_forward,
    jit,
    tl,
    triton,
)


@jit
def _attn_bwd_dkdv(
    Q,
    K,
    V,
    dO,
    L,
    Delta,  # inputs: (B, H, T, d) x 4, (B, H, T) fp32 x 2
    dK,
    dV,  # outputs, (B, H, T, d)
    scale,
    N,  # score scale; sequence length
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
):
    start_n, off_bh = tl.program_id(0), tl.program_id(1)  # key block, (batch, head)
    base, row_base = off_bh.to(tl.int64) * N * HEAD_DIM, off_bh.to(tl.int64) * N
    cols = start_n * BLOCK_N + tl.arange(0, BLOCK_N)  # the keys of this program
    offs_d = tl.arange(0, HEAD_DIM)
    col_ok = cols < N
    kv_offs = base + cols[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(K + kv_offs, mask=col_ok[:, None], other=0.0)  # (B_c, d)
    v = tl.load(V + kv_offs, mask=col_ok[:, None], other=0.0)  # (B_c, d)
    if UPCAST:
        k, v = k.to(tl.float32), v.to(tl.float32)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    lo = 0
    if CAUSAL:  # queries before this key block cannot see it
        lo = (start_n * BLOCK_N) // BLOCK_M * BLOCK_M
    for start_m in range(lo, N, BLOCK_M):
        rows = start_m + tl.arange(0, BLOCK_M)
        row_ok = rows < N
        q_offs = base + rows[:, None] * HEAD_DIM + offs_d[None, :]
        q = tl.load(Q + q_offs, mask=row_ok[:, None], other=0.0)  # (B_r, d)
        do = tl.load(dO + q_offs, mask=row_ok[:, None], other=0.0)  # (B_r, d)
        if UPCAST:
            q, do = q.to(tl.float32), do.to(tl.float32)
        lse = tl.load(L + row_base + rows, mask=row_ok, other=0.0)  # (B_r,)
        delta = tl.load(Delta + row_base + rows, mask=row_ok, other=0.0)  # (B_r,)
        s = tl.dot(q, tl.trans(k)) * scale  # (B_r, B_c)
        valid = row_ok[:, None] & col_ok[None, :]
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        p = tl.exp(tl.where(valid, s, float("-inf")) - lse[:, None])  # recomputed P
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)  # (B_c, d)
        dp = tl.dot(do, tl.trans(v))  # (B_r, B_c)
        ds = p * (dp - delta[:, None])  # (B_r, B_c)
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)  # (B_c, d)
    tl.store(dK + kv_offs, (dk * scale).to(dK.dtype.element_ty), mask=col_ok[:, None])
    tl.store(dV + kv_offs, dv.to(dV.dtype.element_ty), mask=col_ok[:, None])


@jit
def _attn_bwd_dq(
    Q,
    K,
    V,
    dO,
    L,
    Delta,  # inputs, as in _attn_bwd_dkdv
    dQ,  # output, (B, H, T, d)
    scale,
    N,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
):
    start_m, off_bh = tl.program_id(0), tl.program_id(1)  # query block, (batch, head)
    base, row_base = off_bh.to(tl.int64) * N * HEAD_DIM, off_bh.to(tl.int64) * N
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # the queries of this program
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = rows < N
    q_offs = base + rows[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(Q + q_offs, mask=row_ok[:, None], other=0.0)  # (B_r, d)
    do = tl.load(dO + q_offs, mask=row_ok[:, None], other=0.0)  # (B_r, d)
    if UPCAST:
        q, do = q.to(tl.float32), do.to(tl.float32)
    lse = tl.load(L + row_base + rows, mask=row_ok, other=0.0)  # (B_r,)
    delta = tl.load(Delta + row_base + rows, mask=row_ok, other=0.0)  # (B_r,)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    hi = N
    if CAUSAL:  # keys after this block's last query are masked
        hi = tl.minimum((start_m + 1) * BLOCK_M, N)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        col_ok = cols < N
        kv_offs = base + cols[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(K + kv_offs, mask=col_ok[:, None], other=0.0)  # (B_c, d)
        v = tl.load(V + kv_offs, mask=col_ok[:, None], other=0.0)  # (B_c, d)
        if UPCAST:
            k, v = k.to(tl.float32), v.to(tl.float32)
        s = tl.dot(q, tl.trans(k)) * scale  # (B_r, B_c)
        valid = row_ok[:, None] & col_ok[None, :]
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        p = tl.exp(tl.where(valid, s, float("-inf")) - lse[:, None])  # (B_r, B_c)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])  # (B_r, B_c)
        dq += tl.dot(ds.to(k.dtype), k)  # (B_r, d)
    tl.store(dQ + q_offs, (dq * scale).to(dQ.dtype.element_ty), mask=row_ok[:, None])


def flash_attention_triton_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    lse: Tensor,
    do: Tensor,
    causal: bool,
    scale: float,
    block_m: int = 16,
    block_n: int = 16,
) -> tuple[Tensor, Tensor, Tensor]:
    """Launch the two backward kernels; shapes as the forward, ``lse`` (B, H, T).

    Returns:
        ``dq, dk, dv``, each ``(B, H, T, d)`` in the dtype of ``q``.
    """
    B, H, N, D = q.shape
    q, k, v, do = (t.contiguous() for t in (q, k, v, do))
    delta = (o.float() * do.float()).sum(dim=-1)  # D_i = rowsum(dO * O), (B, H, T)
    upcast = q.device.type == "cpu"  # interpreter: fp32 outputs, rounded by PyTorch
    out = {"dtype": torch.float32 if upcast else q.dtype, "device": q.device}
    dq, dk, dv = (torch.empty(B, H, N, D, **out) for _ in range(3))
    meta = {
        "HEAD_DIM": D,
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "CAUSAL": causal,
        "UPCAST": upcast,
    }
    inputs = (q, k, v, do, lse, delta)
    _attn_bwd_dkdv[(triton.cdiv(N, block_n), B * H)](*inputs, dk, dv, scale, N, **meta)
    _attn_bwd_dq[(triton.cdiv(N, block_m), B * H)](*inputs, dq, scale, N, **meta)
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


class FlashAttentionTriton(torch.autograd.Function):
    """The Triton forward and backward kernels as one differentiable operation."""

    @staticmethod
    def forward(
        ctx, q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, block: int
    ) -> Tensor:
        """Run the forward kernel; save ``q, k, v, O, lse``."""
        o, lse = flash_attention_triton_forward(q, k, v, causal, scale, block, block)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.args = (causal, scale, block, block)
        return o

    @staticmethod
    def backward(ctx, do: Tensor) -> tuple[Tensor | None, ...]:
        """Run the backward kernels: gradients of ``q, k, v``."""
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_triton_backward(q, k, v, o, lse, do, *ctx.args)
        return dq, dk, dv, None, None, None


def flash_attention_triton(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool = False,
    scale: float | None = None,
    block: int | None = None,
) -> Tensor:
    """Differentiable FlashAttention in Triton (forward and backward kernels).

    Args:
        q: queries, shape ``(B, H, T, d)``; see
            :func:`~aiinfra.models.flash.triton_forward.flash_attention_triton_forward`.
        k: keys, the same shape.
        v: values, the same shape.
        causal: mask key ``j > i`` for query ``i``.
        scale: default ``1 / sqrt(d)``.
        block: ``B_r = B_c``; default 64 on a GPU, 16 on the CPU.

    Returns:
        Shape ``(B, H, T, d)``.

    Raises:
        ImportError: Triton is not installed.
        ValueError: as the forward launcher.
    """
    if not HAS_TRITON:
        raise ImportError("flash_attention_triton needs the triton package")
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    block = block or (16 if q.device.type == "cpu" else 64)
    return FlashAttentionTriton.apply(q, k, v, causal, scale, block)
