"""Achieved FLOP/s of one GEMM by its shape: a model, built from three things.

A GEMM ``C = A B`` with ``A`` m x k and ``B`` k x n does ``2 m n k`` FLOPs. On one
GPU its time is modelled as the larger of two bounds:

- **memory** (the roofline): it must at least read ``A`` and ``B`` and write ``C``
  once, ``e (m k + k n + m n)`` bytes at the HBM bandwidth, ``e`` the bytes of
  an element (:mod:`aiinfra.accelerators` gives the bandwidth and the peak);
- **math, in whole tiles and whole waves**: as NVIDIA's *Matrix Multiplication
  Background User's Guide* explains, the output is cut into tiles, one per thread
  block, and the tiles run on the SMs in waves. A partial tile costs a full one
  (*tile quantization*) and a partial last wave costs a full wave (*wave
  quantization*). The model takes one large tile of the size of the guide's own
  example (256 x 128 there), here 128 rows of m by 256 columns of n
  (:data:`TILE`): a larger tile reuses more data but leaves fewer tiles to fill
  the SMs. Each wave then lasts ``2 tm tn k`` FLOPs of one SM at
  the ceiling below.
- **the ceiling**: a real kernel never reaches the datasheet's peak even with
  every tile full. The model's one fitted number is the fraction of peak that
  makes it reproduce a published measurement: Bekman's *Maximum Achievable Matmul
  FLOPS* table (:data:`MAMF`), the best BF16 ``torch.matmul`` found by a search
  over shapes, e.g. 792.1 TFLOP/s on an H100 SXM at 6144 x 17920 x 2816 with
  CUDA 12.1. The H200 has the H100's chip, SMs and peaks; without a published
  row it borrows the H100's fraction (an assumption; a lent H200 measures its
  own).

Everything here is a model: a cuBLAS heuristic picks among several tiles, splits
``k`` when ``m n`` is small, and its ceiling varies with the shape.
"""

from __future__ import annotations

import functools
import math

from aiinfra import checks
from aiinfra.accelerators import GPUS

#: Bytes of one element per number format the model prices.
DTYPES = {"bf16": 2, "fp16": 2}

#: Output tile (rows of ``m``, columns of ``n``): the size of the guide's example.
TILE = (128, 256)

#: Published best BF16 matmul per GPU: (TFLOP/s, (m, n, k)) from Bekman,
#: *Machine Learning Engineering*, "Maximum Achievable Matmul FLOPS comparison
#: table" (A100 SXM: CUDA 12.1; H100 SXM: CUDA 12.1).
MAMF = {
    "A100": (267.9e12, (6912, 16384, 2048)),
    "H100": (792.1e12, (6144, 17920, 2816)),
}
#: GPUs without a published row, and the GPU whose fraction of peak they borrow.
MAMF_BORROWED = {"H200": "H100"}


def _check(m: int, n: int, k: int, gpu: str, dtype: str) -> None:
    for name, value in (("m", m), ("n", n), ("k", k)):
        checks.positive_int(name, value)
    if gpu not in GPUS:
        raise ValueError(f"gpu must be one of {sorted(GPUS)}, got {gpu!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")


def waves(m: int, n: int, sms: int, tile: tuple[int, int] = TILE) -> tuple[int, int]:
    """Output tiles of an m x n result and the waves they take on ``sms`` SMs.

    Args:
        m: rows of the output.
        n: columns of the output.
        sms: streaming multiprocessors, one tile each at a time.
        tile: the tile's rows and columns.

    Returns:
        ``(ceil(m / tm) ceil(n / tn), ceil(tiles / sms))``.
    """
    tiles = math.ceil(m / tile[0]) * math.ceil(n / tile[1])
    return tiles, math.ceil(tiles / sms)


def _math_seconds(
    m: int, n: int, k: int, gpu: str, dtype: str, ceiling: float
) -> float:
    g = GPUS[gpu]
    _, w = waves(m, n, g.sms)
    per_sm = ceiling * g.peak(dtype) / g.sms  # FLOP/s of one SM at the ceiling
    return w * 2 * TILE[0] * TILE[1] * k / per_sm


@functools.cache
def ceiling(gpu: str) -> float:
    """Fraction of dense peak a full wave of full tiles reaches (fitted).

    Chosen so that :func:`gemm_flops` at the published best shape of
    :data:`MAMF` gives the published TFLOP/s.

    Raises:
        ValueError: a GPU with no published measurement to fit to.
    """
    ref = MAMF_BORROWED.get(gpu, gpu)
    if ref not in MAMF:
        raise ValueError(f"gpu must be one of {sorted(MAMF | MAMF_BORROWED)}")
    flops, (m, n, k) = MAMF[ref]
    at_one = 2 * m * n * k / _math_seconds(m, n, k, ref, "bf16", 1.0)
    return flops / at_one


def gemm_seconds(
    m: int, n: int, k: int, gpu: str = "H100", dtype: str = "bf16"
) -> float:
    """Modelled seconds of an (m x k) @ (k x n) GEMM on one GPU.

    Args:
        m: rows of A and of the output, a positive int.
        n: columns of B and of the output, a positive int.
        k: the inner size, a positive int.
        gpu: a key of :data:`aiinfra.accelerators.GPUS`.
        dtype: a key of :data:`DTYPES`.

    Returns:
        ``max(memory time, math time in whole waves of whole tiles)``.

    Raises:
        ValueError: a size that is not a positive int, an unknown GPU or dtype.
    """
    _check(m, n, k, gpu, dtype)
    g = GPUS[gpu]
    memory = DTYPES[dtype] * (m * k + k * n + m * n) / g.hbm_bandwidth
    return max(memory, _math_seconds(m, n, k, gpu, dtype, ceiling(gpu)))


def gemm_flops(m: int, n: int, k: int, gpu: str = "H100", dtype: str = "bf16") -> float:
    """Modelled achieved FLOP/s: ``2 m n k`` over :func:`gemm_seconds`."""
    return 2 * m * n * k / gemm_seconds(m, n, k, gpu, dtype)


def gemm_efficiency(
    m: int, n: int, k: int, gpu: str = "H100", dtype: str = "bf16"
) -> float:
    """Modelled achieved FLOP/s as a fraction of the GPU's dense peak."""
    return gemm_flops(m, n, k, gpu, dtype) / GPUS[gpu].peak(dtype)
