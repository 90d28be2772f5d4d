"""What ``docs/hardware/gpu.rst`` shows: the H100's memory levels and tiling."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.hardware import gpu_memory as gm
from aiinfra.hardware.matmul_triton import tile_traffic
from aiinfra.report import Table

_GPU = "H100"
MATMUL_N = 8192  # M = N = K of the matmul whose tiling the page counts (bf16)
CHECK_N = 1000  # a ragged size, not a multiple of any tile, for the counted points
_CHECK_BLOCK_K = 32  # BLOCK_K of the counted loop: it moves no bytes, as shown
_TILES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # sides of the square tiles plotted
_ACC_BYTES = 4  # an fp32 accumulator element


def hierarchy_table() -> Table:
    """The H100 SXM's memory levels: capacity per SM and per GPU, bandwidth."""

    def kib(x: int | None) -> float | str:
        return "-" if x is None else x // gm.KIB

    def mb(x: int) -> float:
        return round(x / 1e6, 1) if x < 10**9 else x // 10**6

    rows = [
        [lv.name, kib(lv.bytes_per_sm), mb(lv.bytes_total)]
        + ["-" if lv.bandwidth is None else round(lv.bandwidth / 1e12, 2)]
        for lv in gm.h100_memory_levels()
    ]
    note = (
        "Sizes from NVIDIA's H100 whitepaper (KiB = 1024 bytes, MB = 1e6 bytes); "
        "HBM bandwidth from the datasheet; shared memory: 128 bytes per clock per "
        "SM (CUDA programming guide) at the clock of the FP32 peak; -: not "
        "published, or shared by all SMs."
    )
    return Table(["level", "KiB per SM", "MB per GPU", "TB/s"], rows, note)


def h100_sms() -> int:
    """Streaming multiprocessors of the H100 SXM."""
    return GPUS[_GPU].sms


def h100_tensor_cores() -> int:
    """Tensor cores of the H100 SXM (four per SM)."""
    return GPUS[_GPU].sms * gm.TENSOR_CORES_PER_SM


def h100_clock_ghz() -> float:
    """The clock at which the H100 SXM's FP32 peak is quoted, GHz."""
    return gm.fp32_clock_hz(_GPU) / 1e9


def smem_over_hbm() -> float:
    """How many times the shared memory's bandwidth exceeds HBM's."""
    smem, *_, hbm = [lv for lv in gm.h100_memory_levels() if lv.bandwidth]
    return smem.bandwidth / hbm.bandwidth


def h100_ridge() -> float:
    """The H100 SXM's BF16 ridge point, FLOP per byte."""
    return GPUS[_GPU].ridge


def tile_intensity(tile: int) -> float:
    """FLOP per HBM byte of the bf16 N x N x N matmul in square tiles of ``tile``."""
    return tile_traffic(MATMUL_N, MATMUL_N, MATMUL_N, tile, tile).intensity


def largest_register_tile() -> int:
    """Side of the largest power-of-two fp32 accumulator tile an SM's registers hold.

    The tile of ``C`` is accumulated in registers: ``tile^2`` fp32 values must fit
    in the SM's register file, with nothing left for anything else at the bound.
    """
    side = math.isqrt(gm.REGISTER_FILE_BYTES_PER_SM // _ACC_BYTES)
    return 2 ** int(math.log2(side))


def intensity_at_register_tile() -> float:
    """FLOP per HBM byte of the page's matmul with the largest register tile."""
    return tile_intensity(largest_register_tile())


def _counted_intensity(n: int, tile: int, block_k: int) -> float:
    """Walk the kernel's loops for an n x n x n bf16 matmul, counting loads."""
    elements = 0
    for i in range(0, n, tile):
        rows = min(tile, n - i)
        for j in range(0, n, tile):
            cols = min(tile, n - j)
            for k in range(0, n, block_k):
                steps = min(block_k, n - k)
                elements += rows * steps + steps * cols  # tiles of A and B
            elements += rows * cols  # the tile of C, once
    return 2 * n**3 / (2 * elements)


def intensity_figure() -> Figure:
    """Intensity of a tiled matmul against the tile's side, and two GPUs' ridges."""
    fig = Figure(figsize=(8.5, 4), layout="constrained")
    ax = fig.add_subplot()
    for n, style in ((MATMUL_N, "-"), (CHECK_N, "--")):
        ys = [tile_traffic(n, n, n, t, t).intensity for t in _TILES]
        ax.loglog(_TILES, ys, style, color="black", label=f"N = {n}")
    counted = [t for t in _TILES if t >= 16]
    ys = [_counted_intensity(CHECK_N, t, _CHECK_BLOCK_K) for t in counted]
    ax.loglog(counted, ys, "o", color="tab:orange", label="counted")
    for name, colour in (("H100", "tab:red"), ("A100", "tab:blue")):
        ax.axhline(GPUS[name].ridge, color=colour, linestyle=":", label=name)
    ax.axvline(largest_register_tile(), color="grey", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("side of a square tile of C")
    ax.set_ylabel("FLOP per HBM byte (bf16)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig
