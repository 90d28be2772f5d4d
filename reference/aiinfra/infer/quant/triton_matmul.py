"""Weight-only quantized matmul as a Triton kernel: dequantize tile by tile.

``y = x W_hat^T`` with ``x (M, K)`` in floating point and ``W (N, K)`` stored as int8
codes or int4 codes packed two per byte (:func:`aiinfra.infer.quant.rtn.pack_int4`),
plus a float scale (and, for zero-point codes, an integer zero-point) per group of ``g``
consecutive inputs of each output row. One program computes a ``(B_M, B_N)`` tile of
``y``: it streams ``K`` in blocks of ``B_K``, loads the *codes* of a ``(B_K, B_N)`` tile
of ``W^T``, turns them into floats in registers, and multiplies. The full-precision
weight never exists in HBM, so a decoding step reads 1 (int8) or 1/2 (int4) byte per
weight instead of 2 (the idea of the weight-only kernels in LLM.int8's ``bitsandbytes``,
GPTQ's CUDA kernel and Marlin; Frantar et al. 2022, Sec. 5); :func:`decode_step_time`
models what that saves. In pseudo-code::

    acc = 0                                       # (B_M, B_N), fp32
    for each block of B_K inputs:
        x = load(X[rows, block])                  # (B_M, B_K)
        q = load(codes of W[cols, block]).T       # (B_K, B_N), int4 unpacked
        w = (q - z[group]) * s[group]             # (B_K, B_N), floats on chip
        acc += x @ w
    store(Y[rows, cols], acc)

As in :mod:`aiinfra.models.flash.triton_forward`, on the CPU the kernel runs in Triton's
interpreter (``TRITON_INTERPRET=1`` set before import) and computes in fp32; on a
GPU the dequantized tile is cast to ``x``'s dtype for the tensor cores. Importing
this module works without Triton; calling it does not.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiinfra import checks
from aiinfra.accelerators import Gpu
from aiinfra.infer.quant.rtn import QuantizedLinear, check_float_tensor
from aiinfra.infer.step_cost import decode_step, roof_time
from aiinfra.models.config import TransformerConfig
from aiinfra.triton_support import import_triton

triton, tl, jit, HAS_TRITON = import_triton()


@jit
def _weight_only_matmul(
    X,  # pointer to the input, (M, K) contiguous
    Codes,  # pointer to the codes, (N, K) int8/uint8 or (N, K / 2) packed uint8
    Scale,  # pointer to the scales, (N, K / g) fp32
    Zero,  # pointer to the zero-points, (N, K / g) int32 (unused if not HAS_ZERO)
    Y,  # pointer to the output, (M, N)
    M,  # rows of x (tokens)
    N,  # outputs (rows of W)
    K,  # inputs
    GROUP: tl.constexpr,  # g: inputs that share a scale
    BITS: tl.constexpr,  # 4 or 8
    SIGNED: tl.constexpr,  # absmax codes (signed) or zero-point codes (unsigned)
    HAS_ZERO: tl.constexpr,  # subtract a zero-point
    BLOCK_M: tl.constexpr,  # B_M
    BLOCK_N: tl.constexpr,  # B_N
    BLOCK_K: tl.constexpr,  # B_K
    UPCAST: tl.constexpr,  # fp32 tiles (interpreter); else x's dtype
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of this tile
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # outputs of this tile
    offs_k = tl.arange(0, BLOCK_K)
    n_groups = K // GROUP
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start_k in range(0, K, BLOCK_K):
        ks = start_k + offs_k  # inputs of this step
        x = tl.load(
            X + offs_m[:, None] * K + ks[None, :],
            mask=(offs_m[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )  # (B_M, B_K)
        w_ok = (ks[:, None] < K) & (offs_n[None, :] < N)
        # region dequantize
        if BITS == 4:  # two codes per byte: input k in byte k // 2, nibble k % 2
            byte = tl.load(
                Codes + offs_n[None, :] * (K // 2) + ks[:, None] // 2,
                mask=w_ok,
                other=0,
            ).to(tl.int32)  # (B_K, B_N)
            q = (byte >> ((ks[:, None] % 2) * 4)) & 0xF
            if SIGNED:
                q = tl.where(q > 7, q - 16, q)  # two's complement nibble
        else:
            q = tl.load(
                Codes + offs_n[None, :] * K + ks[:, None], mask=w_ok, other=0
            ).to(tl.int32)  # (B_K, B_N)
        g_idx = offs_n[None, :] * n_groups + ks[:, None] // GROUP  # (B_K, B_N)
        s = tl.load(Scale + g_idx, mask=w_ok, other=0.0)
        if HAS_ZERO:
            q = q - tl.load(Zero + g_idx, mask=w_ok, other=0)
        w = q.to(tl.float32) * s  # (B_K, B_N): W_hat^T, only on chip
        # endregion
        if UPCAST:
            acc += tl.dot(x.to(tl.float32), w)
        else:
            acc += tl.dot(x, w.to(x.dtype))  # tensor cores, fp32 accumulation
    tl.store(
        Y + offs_m[:, None] * N + offs_n[None, :],
        acc.to(Y.dtype.element_ty),
        mask=(offs_m[:, None] < M) & (offs_n[None, :] < N),
    )


def weight_only_matmul(
    x: Tensor,
    codes: Tensor,
    scale: Tensor,
    zero: Tensor | None = None,
    bits: int = 4,
    block_m: int = 16,
    block_n: int | None = None,
    block_k: int | None = None,
) -> Tensor:
    """``x W_hat^T`` with ``W`` as codes, dequantized inside the kernel.

    Args:
        x: ``(..., K)`` fp16, bf16 or fp32 input; on a GPU, or on the CPU under
            ``TRITON_INTERPRET=1``.
        codes: ``(N, K)`` int8 (absmax) / uint8 (zero-point) codes for
            ``bits=8``; ``(N, K / 2)`` uint8 packed pairs for ``bits=4``.
        scale: ``(N, K / g)`` scales (``(N, 1)``: per-channel).
        zero: zero-points of ``scale``'s shape, or None for absmax codes.
        bits: 4 or 8.
        block_m: ``B_M``; 16 suits decoding's few rows.
        block_n: ``B_N``; default 64 on a GPU, 16 on the CPU.
        block_k: ``B_K``; default 64 on a GPU, 16 on the CPU.

    Returns:
        ``(..., N)`` in ``x``'s dtype.

    Raises:
        ImportError: Triton is not installed.
        RuntimeError: CPU tensors, but the kernel was not defined in interpreter mode.
        TypeError: ``x`` is not floating-point or the codes have the wrong dtype.
        ValueError: ``bits`` is not 4 or 8, shapes disagree, or a block size is not
            a power of two >= 16.
    """
    if not HAS_TRITON:
        raise ImportError("weight_only_matmul needs the triton package")
    check_float_tensor("x", x)
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")
    signed = zero is None
    want = torch.uint8 if bits == 4 or not signed else torch.int8
    if not isinstance(codes, Tensor) or codes.dtype != want:
        kind = "absmax" if signed else "zero-point"
        got = getattr(codes, "dtype", codes)
        raise TypeError(f"codes must be {want} for bits={bits} ({kind}), got {got}")
    K = x.shape[-1]
    N = codes.shape[0]
    if codes.dim() != 2 or codes.shape[1] * (8 // bits) != K:
        raise ValueError(
            f"codes must be (N, K * bits / 8) = (N, {K * bits // 8}) for x's K = {K}, "
            f"got {tuple(codes.shape)}"
        )
    if scale.dim() != 2 or scale.shape[0] != N or K % scale.shape[1]:
        raise ValueError(
            f"scale must be (N, K / g) with N = {N} and g dividing K = {K}, "
            f"got {tuple(scale.shape)}"
        )
    if zero is not None and zero.shape != scale.shape:
        raise ValueError(f"zero must have scale's shape {tuple(scale.shape)}")
    cpu = x.device.type == "cpu"
    block_n, block_k = block_n or (16 if cpu else 64), block_k or (16 if cpu else 64)
    for name, b in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k)):
        checks.power_of_two(name, b, 16)
    if cpu and type(_weight_only_matmul).__name__ != "InterpretedFunction":
        raise RuntimeError(
            "Triton runs CPU tensors only in its interpreter: set "
            "TRITON_INTERPRET=1 before importing this module"
        )
    x2 = x.reshape(-1, K).contiguous()  # (M, K)
    M = x2.shape[0]
    y = torch.empty(M, N, dtype=torch.float32 if cpu else x.dtype, device=x.device)
    scale32 = scale.float().contiguous()
    zero32 = scale32 if zero is None else zero.to(torch.int32).contiguous()
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    _weight_only_matmul[grid](
        x2,
        codes.contiguous(),
        scale32,
        zero32,
        y,
        M,
        N,
        K,
        GROUP=K // scale.shape[1],
        BITS=bits,
        SIGNED=signed,
        HAS_ZERO=not signed,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        UPCAST=cpu,
    )
    return y.to(x.dtype).reshape(*x.shape[:-1], N)  # (..., N)


def quantized_linear_triton(layer: QuantizedLinear, x: Tensor) -> Tensor:
    """``layer(x)`` through the Triton kernel instead of a dequantized weight.

    Args:
        layer: a :class:`~aiinfra.infer.quant.rtn.QuantizedLinear`.
        x: ``(..., in)`` input.

    Returns:
        ``(..., out)``, plus the layer's bias.

    Raises:
        TypeError: ``layer`` is not a ``QuantizedLinear``; and as
            :func:`weight_only_matmul`.
    """
    if not isinstance(layer, QuantizedLinear):
        raise TypeError(f"layer must be a QuantizedLinear, got {type(layer).__name__}")
    y = weight_only_matmul(x, layer.codes, layer.scale, layer.zero, layer.bits)
    return y if layer.bias is None else y + layer.bias.to(y.dtype)


# The cost model: what weight-only kernels save in one decoding step.
WEIGHT_FORMATS = {  # weights -> (bits per weight, format the matmul computes in)
    "bf16": (16, "bf16"),
    "int8": (8, "bf16"),  # weight-only: dequantized to bf16 on chip
    "int4": (4, "bf16"),
    "fp8": (8, "fp8"),  # W8A8: activations in fp8 too, on fp8 tensor cores
}


def decode_step_time(
    c: TransformerConfig,
    gpu: Gpu,
    batch: int,
    context: int,
    weights: str = "bf16",
    group_size: int = 128,
) -> float:
    """Seconds of one decoding step of ``batch`` sequences: a roofline cost model.

    The step reads every matmul weight once (``bits / 8`` bytes each, plus one
    2-byte scale per ``group_size`` weights for int8 and int4; the embedding table
    is only indexed) and each sequence's bf16 KV cache of ``context`` tokens, and
    does ``2`` FLOPs per weight and ``4 H d T L`` attention FLOPs per sequence
    (:func:`~aiinfra.infer.step_cost.decode_step`). It takes the longer of bytes
    over HBM bandwidth and FLOPs over the dense peak of the format the matmul runs
    in (:func:`~aiinfra.infer.step_cost.roof_time`): a model, not a measurement;
    real kernels reach a fraction of both roofs.

    Args:
        c: the model.
        gpu: the accelerator.
        batch: ``B``, sequences decoded together.
        context: ``T``, tokens cached per sequence.
        weights: a key of :data:`WEIGHT_FORMATS`.
        group_size: ``g`` of the int8/int4 scales.

    Raises:
        ValueError: ``weights`` unknown, a size not a positive integer, or a
            mixture-of-experts model.
    """
    if weights not in WEIGHT_FORMATS:
        raise ValueError(
            f"weights must be one of {list(WEIGHT_FORMATS)}, got {weights!r}"
        )
    for name, v in (("batch", batch), ("context", context), ("group_size", group_size)):
        checks.positive_int(name, v)
    bits, fmt = WEIGHT_FORMATS[weights]
    group = group_size if weights in ("int8", "int4") else None  # scales
    step = decode_step(c, batch, context, bits / 8, group)  # the one count
    return float(roof_time(step, gpu, fmt))
