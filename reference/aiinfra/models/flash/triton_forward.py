"""FlashAttention's forward pass as a Triton kernel.

The kernel is the loop of :func:`aiinfra.models.flash.attention.tiled_forward` with
one program per (query block, batch x head): the program loads its ``B_r`` queries
once, streams the keys and values in blocks of ``B_c``, and keeps the running
maximum ``m_i``, sum ``l_i`` and accumulator ``acc`` in registers, so the ``T x T``
scores never reach memory (Dao et al. 2022, Alg. 1; FlashAttention-2, Dao 2023,
Alg. 1; the layout follows Triton's fused-attention tutorial). In pseudo-code::

    q = load(Q[block])                      # (B_r, d), stays on chip
    for each key block j (up to the diagonal if causal):
        s = q @ load(K[j]).T * scale        # (B_r, B_c)
        m_new = max(m_i, rowmax(s)); p = exp(s - m_new)
        l_i = l_i * exp(m_i - m_new) + rowsum(p)
        acc = acc * exp(m_i - m_new) + p @ load(V[j])
        m_i = m_new
    store(O[block], acc / l_i); store(lse[block], m_i + log(l_i))

Exponentials use ``exp2`` with the scale premultiplied by ``log2(e)``, the fast path
on GPUs. On the CPU the kernel runs in Triton's interpreter (``TRITON_INTERPRET=1``
set before import), whose bf16 loads and stores are wrong (stores truncate), so there
the tiles are cast to fp32 after loading and the output is stored in fp32 and rounded
by PyTorch. Importing this module works without Triton; calling it does not.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from aiinfra.models.flash.attention import check_attention_inputs
from aiinfra.triton_support import import_triton

triton, tl, jit, HAS_TRITON = import_triton()


@jit
def _attn_fwd(
    Q,  # pointer to queries, (B, H, T, d) contiguous
    K,  # pointer to keys, same layout
    V,  # pointer to values, same layout
    Out,  # pointer to the output, same layout
    L,  # pointer to the log-sum-exp per row, (B, H, T) fp32
    qk_scale,  # score scale times log2(e), so that exp2 gives exp
    N,  # sequence length; need not be a multiple of the blocks
    HEAD_DIM: tl.constexpr,  # d: a power of two >= 16 (tl.dot's minimum)
    BLOCK_M: tl.constexpr,  # B_r: queries per program
    BLOCK_N: tl.constexpr,  # B_c: keys per step of the inner loop
    CAUSAL: tl.constexpr,  # mask key j > query i, and stop at the diagonal
    UPCAST: tl.constexpr,  # cast tiles to fp32 after loading (interpreter)
):
    # region program
    start_m = tl.program_id(0)  # which block of queries
    off_bh = tl.program_id(1)  # which (batch, head)
    base = off_bh.to(tl.int64) * N * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # query rows of this program
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m[:, None] < N
    q = tl.load(
        Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok, other=0.0
    )  # (B_r, d)
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max (log2 units)
    l_i = tl.zeros([BLOCK_M], tl.float32)  # running sum
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)  # running weighted sum of V
    hi = N
    if CAUSAL:  # keys after the block's last query are masked: skip them
        hi = tl.minimum((start_m + 1) * BLOCK_M, N)
    # endregion
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n  # key positions of this step
        col_ok = cols < N
        k_t = tl.load(
            K + base + cols[None, :] * HEAD_DIM + offs_d[:, None],
            mask=col_ok[None, :],
            other=0.0,
        )  # (d, B_c): K transposed
        v = tl.load(
            V + base + cols[:, None] * HEAD_DIM + offs_d[None, :],
            mask=col_ok[:, None],
            other=0.0,
        )  # (B_c, d)
        if UPCAST:
            k_t, v = k_t.to(tl.float32), v.to(tl.float32)
        # region update
        s = tl.dot(q, k_t) * qk_scale  # (B_r, B_c), fp32 accumulation
        visible = col_ok[None, :]
        if CAUSAL:
            visible = visible & (cols[None, :] <= offs_m[:, None])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])  # (B_r, B_c)
        alpha = tl.math.exp2(m_i - m_new)  # rescales what was summed so far
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)  # (B_r, d)
        m_i = m_new
        # endregion
    acc = acc / l_i[:, None]
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453  # times ln 2: natural log
    tl.store(L + off_bh.to(tl.int64) * N + offs_m, lse, mask=offs_m < N)
    tl.store(
        Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
        acc.to(Out.dtype.element_ty),
        mask=row_ok,
    )


def flash_attention_triton_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Launch the forward kernel: one program per (query block, batch x head).

    Args:
        q: queries, shape ``(B, H, T, d)``, on a GPU, or on the CPU under
            ``TRITON_INTERPRET=1``; fp16, bf16 or fp32 (TF32 on a GPU).
        k: keys, the same shape, device and dtype.
        v: values, the same shape, device and dtype.
        causal: mask key ``j > i`` for query ``i``.
        scale: default ``1 / sqrt(d)``.
        block_m: ``B_r``; default 64 on a GPU, 16 on the CPU (the interpreter is slow).
        block_n: ``B_c``; same defaults.

    Returns:
        ``O`` of shape ``(B, H, T, d)`` (dtype of ``q``) and the log-sum-exp ``lse``
        of shape ``(B, H, T)`` in fp32.

    Raises:
        ImportError: Triton is not installed.
        RuntimeError: CPU tensors, but the kernel was not defined in interpreter mode.
        ValueError: bad shapes or dtypes, ``d`` not a power of two >= 16, or block
            sizes that are not powers of two >= 16.
    """
    if not HAS_TRITON:
        raise ImportError("flash_attention_triton needs the triton package")
    if q.device.type == "cpu" and type(_attn_fwd).__name__ != "InterpretedFunction":
        raise RuntimeError(
            "Triton runs CPU tensors only in its interpreter: set "
            "TRITON_INTERPRET=1 before importing this module"
        )
    check_attention_inputs(q, k, v)
    B, H, N, D = q.shape
    if D < 16 or D & (D - 1):
        raise ValueError(f"head dim d must be a power of two >= 16, got {D}")
    default = 16 if q.device.type == "cpu" else 64
    block_m, block_n = block_m or default, block_n or default
    for name, b in (("block_m", block_m), ("block_n", block_n)):
        if b < 16 or b & (b - 1):
            raise ValueError(f"{name} must be a power of two >= 16, got {b}")
    scale = 1 / math.sqrt(D) if scale is None else scale
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    upcast = q.device.type == "cpu"  # the interpreter: fp32 tiles, fp32 output
    o = torch.empty_like(q, dtype=torch.float32 if upcast else q.dtype)  # (B,H,T,d)
    lse = torch.empty(B, H, N, dtype=torch.float32, device=q.device)  # (B, H, T)
    grid = (triton.cdiv(N, block_m), B * H)
    _attn_fwd[grid](
        q,
        k,
        v,
        o,
        lse,
        scale * math.log2(math.e),
        N,
        HEAD_DIM=D,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        CAUSAL=causal,
        UPCAST=upcast,
    )
    return o.to(q.dtype), lse  # on the CPU, PyTorch rounds to bf16 (to nearest)
