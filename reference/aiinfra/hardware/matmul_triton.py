"""A tiled matmul in Triton, and why the tile size sets its arithmetic intensity.

``C = A B`` with ``A`` of ``M x K`` and ``B`` of ``K x N``: one program computes one
``BLOCK_M x BLOCK_N`` tile of ``C``. It walks ``K`` in steps of ``BLOCK_K``, loads a
``BLOCK_M x BLOCK_K`` tile of ``A`` and a ``BLOCK_K x BLOCK_N`` tile of ``B`` from
HBM into on-chip memory, and accumulates their product in fp32 registers; ``C``'s
tile is written once at the end (Triton, Tillet, Kung & Cox 2019; the layout of
Triton's matrix-multiplication tutorial, without its L2-friendly program order).
In pseudo-code::

    acc = zeros(BLOCK_M, BLOCK_N)             # fp32, in registers
    for k in range(0, K, BLOCK_K):
        a = load(A[rows, k:k + BLOCK_K])      # (BLOCK_M, BLOCK_K)
        b = load(B[k:k + BLOCK_K, cols])      # (BLOCK_K, BLOCK_N)
        acc += a @ b                          # tensor cores on a GPU
    store(C[rows, cols], acc)

Each element of ``A`` is loaded once per column of tiles, ``ceil(N / BLOCK_N)``
times, and each of ``B`` ``ceil(M / BLOCK_M)`` times, so the bytes from HBM fall as
the tiles grow and the intensity rises: about ``BLOCK / bytes_per_element`` FLOP per
byte for square tiles of side ``BLOCK``, whatever ``K`` (:func:`tile_traffic`), the
same argument as FlashAttention's. On the CPU the kernel runs in Triton's
interpreter, where bf16 loads are wrong: there the tiles are cast to fp32 after
loading and ``C`` is stored in fp32. Importing this module works without Triton.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiinfra import checks
from aiinfra.models.roofline import Kernel
from aiinfra.triton_support import import_triton

triton, tl, jit, HAS_TRITON = import_triton()


@jit
def _matmul_kernel(
    A,  # pointer to A, (M, K)
    B,  # pointer to B, (K, N)
    C,  # pointer to C, (M, N)
    M,  # rows of A and C; need not be a multiple of BLOCK_M
    N,  # columns of B and C
    K,  # the contracted dimension
    stride_am,  # elements between rows of A
    stride_ak,  # ... and between its columns
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,  # rows of C per program
    BLOCK_N: tl.constexpr,  # columns of C per program
    BLOCK_K: tl.constexpr,  # step along K
    UPCAST: tl.constexpr,  # cast tiles to fp32 after loading (interpreter)
):
    pid_m = tl.program_id(0)  # which tile row of C
    pid_n = tl.program_id(1)  # which tile column of C
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    a_ptrs = A + rows[:, None] * stride_am + ks[None, :] * stride_ak  # (BM, BK)
    b_ptrs = B + ks[:, None] * stride_bk + cols[None, :] * stride_bn  # (BK, BN)
    # region tile-loop
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # stays in registers
    for k in range(0, K, BLOCK_K):
        a_ok = (rows[:, None] < M) & (k + ks[None, :] < K)  # ragged edges: 0
        b_ok = (k + ks[:, None] < K) & (cols[None, :] < N)
        a = tl.load(a_ptrs, mask=a_ok, other=0.0)  # (BLOCK_M, BLOCK_K), from HBM
        b = tl.load(b_ptrs, mask=b_ok, other=0.0)  # (BLOCK_K, BLOCK_N)
        if UPCAST:
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc += tl.dot(a, b)  # on the tensor cores, fp32 accumulation
        a_ptrs += BLOCK_K * stride_ak  # the next tiles along K
        b_ptrs += BLOCK_K * stride_bk
    # endregion
    c_ok = (rows[:, None] < M) & (cols[None, :] < N)
    c_ptrs = C + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=c_ok)


def matmul_triton(
    a: Tensor,
    b: Tensor,
    block_m: int | None = None,
    block_n: int | None = None,
    block_k: int | None = None,
) -> Tensor:
    """``a @ b`` by the tiled kernel: one program per tile of the output.

    Args:
        a: ``(M, K)``, fp32, fp16 or bf16, on a GPU or on the CPU under
            ``TRITON_INTERPRET=1``.
        b: ``(K, N)``, the same dtype and device.
        block_m: rows of a tile; default 64 on a GPU, 16 on the CPU.
        block_n: columns of a tile; same defaults.
        block_k: step along ``K``; default 32 on a GPU, 16 on the CPU.

    Returns:
        ``(M, N)`` in the inputs' dtype, accumulated in fp32.

    Raises:
        ImportError: Triton is not installed.
        RuntimeError: CPU tensors, but the kernel was not defined in interpreter mode.
        TypeError: not tensors, or a dtype other than fp32, fp16 and bf16.
        ValueError: not 2-D, inner sizes differ, different dtypes or devices, or a
            block that is not a power of two >= 16.
    """
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("a and b must be tensors")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(
            f"a (M, K) and b (K, N) must be 2-D with equal K, got {tuple(a.shape)} "
            f"and {tuple(b.shape)}"
        )
    if a.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"a must be fp32, fp16 or bf16, got {a.dtype}")
    if b.dtype != a.dtype or b.device != a.device:
        raise ValueError(
            f"b must match a's dtype and device, got {b.dtype}, {b.device}"
        )
    gpu = a.device.type != "cpu"
    block_m, block_n = block_m or (64 if gpu else 16), block_n or (64 if gpu else 16)
    block_k = block_k or (32 if gpu else 16)
    for name, value in {"block_m": block_m, "block_n": block_n}.items():
        checks.power_of_two(name, value, 16)
    checks.power_of_two("block_k", block_k, 16)
    if not HAS_TRITON:
        raise ImportError("matmul_triton needs the triton package")
    if not gpu and type(_matmul_kernel).__name__ != "InterpretedFunction":
        raise RuntimeError(
            "Triton runs CPU tensors only in its interpreter: set "
            "TRITON_INTERPRET=1 before importing this module"
        )
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype if gpu else torch.float32)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    strides = (*a.stride(), *b.stride(), *c.stride())
    blocks = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k}
    _matmul_kernel[grid](a, b, c, M, N, K, *strides, **blocks, UPCAST=not gpu)
    return c.to(a.dtype)  # on the CPU, PyTorch rounds the fp32 result


def tile_traffic(
    m: int,
    n: int,
    k: int,
    block_m: int,
    block_n: int,
    bytes_per_element: int = 2,
) -> Kernel:
    """FLOPs and HBM bytes of the tiled matmul, no tile reused from a cache.

    Program ``(i, j)`` loads its ``r_i`` rows of ``A`` and ``c_j`` columns of ``B``
    over all of ``K`` (masked elements are not loaded), and stores its tile of ``C``:
    summed over the ``ceil(M / BLOCK_M) ceil(N / BLOCK_N)`` programs,
    ``K (M ceil(N / BLOCK_N) + N ceil(M / BLOCK_M)) + M N`` elements. ``BLOCK_K``
    does not appear: it sets how much is on chip at once, not how much is loaded.

    Args:
        m: ``M``, rows of ``A``.
        n: ``N``, columns of ``B``.
        k: ``K``.
        block_m: ``BLOCK_M``.
        block_n: ``BLOCK_N``.
        bytes_per_element: 2 for bf16.

    Returns:
        A :class:`~aiinfra.models.roofline.Kernel` of ``2 M N K`` FLOPs.

    Raises:
        ValueError: a size is not a positive integer.
    """
    sizes = {"m": m, "n": n, "k": k, "block_m": block_m, "block_n": block_n}
    for name, value in (sizes | {"bytes_per_element": bytes_per_element}).items():
        checks.positive_int(name, value)
    tiles_m, tiles_n = -(-m // block_m), -(-n // block_n)  # ceil
    elements = k * (m * tiles_n + n * tiles_m) + m * n
    name = f"tiled matmul {block_m} x {block_n}"
    return Kernel(name, 2 * m * n * k, elements * bytes_per_element)
