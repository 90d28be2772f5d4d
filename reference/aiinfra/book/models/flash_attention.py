"""What ``docs/models/flash_attention.rst`` shows: its values, tables, figures."""

from __future__ import annotations

import functools
from dataclasses import replace

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.models.flash import bench as attention_bench
from aiinfra.models.flash import kernel_matmuls, steps
from aiinfra.models.flash import memory as attention_memory
from aiinfra.report import Table

SCORES = (1.0, 3.0, 2.0, 0.5, 4.0, 2.5, 1.5, 5.0)  # the maximum grows three times


def online_softmax_figure() -> Figure:
    """The online softmax's state after each of eight scores, in a grid."""
    return steps.softmax_figure(SCORES)


def online_softmax_frames() -> list[Figure]:
    """The online softmax's state after each of eight scores, one frame each."""
    return steps.softmax_frames(SCORES)


def flash_tiles_figure() -> Figure:
    """The tiles causal tiled_forward visits, 4 x 4 blocks, in a grid."""
    return steps.tile_figure(n=8, block_q=2, block_k=2, causal=True)


def flash_tiles_frames() -> list[Figure]:
    """The tiles causal tiled_forward visits, 4 x 4 blocks, one frame each."""
    return steps.tile_frames(n=8, block_q=2, block_k=2, causal=True)


def backward_matmul_table() -> Table:
    """Products per tile of the forward pass and of the two backward designs."""
    return kernel_matmuls.backward_table()


def backward_matmul_figure() -> Figure:
    """Products per tile of a training step, stacked by pass, per design."""
    return kernel_matmuls.backward_figure()


def backward_products_one_kernel() -> int:
    """Products per tile of tiled_backward (one kernel, dQ accumulated)."""
    return kernel_matmuls.backward_matmuls()["one kernel"]


def backward_products_two_kernels() -> int:
    """Products per tile of the two Triton backward kernels together."""
    return kernel_matmuls.backward_matmuls()["two kernels"]


def backward_extra_flops() -> float:
    """Extra backward FLOPs of the two-kernel design over the one-kernel one."""
    n = kernel_matmuls.backward_matmuls()
    return n["two kernels"] / n["one kernel"] - 1


def training_extra_flops() -> float:
    """Extra attention FLOPs of a training step, two kernels against one."""
    n = kernel_matmuls.backward_matmuls()
    return (n["forward"] + n["two kernels"]) / (n["forward"] + n["one kernel"]) - 1


@functools.cache
def _curve() -> dict[str, list[int]]:
    return attention_memory.memory_curve()


def attention_memory_figure() -> Figure:
    """Measured peak bytes against T, standard and tiled attention."""
    return attention_memory.memory_figure(_curve())


def attention_memory_table() -> Table:
    """The measurements behind the figure, KiB."""
    return attention_memory.memory_table(_curve())


def standard_growth_exponent() -> float:
    """Fitted growth exponent of standard attention's peak memory in T."""
    return attention_memory.growth_exponent(_curve()["N"], _curve()["standard_peak"])


def tiled_growth_exponent() -> float:
    """Fitted growth exponent of tiled attention's peak memory in T."""
    return attention_memory.growth_exponent(_curve()["N"], _curve()["tiled_peak"])


def longest_measured_n() -> int:
    """The longest sequence of the measurement."""
    return _curve()["N"][-1]


def tiled_saving_at_longest_n() -> float:
    """Standard over tiled peak memory at the longest sequence."""
    return _curve()["standard_peak"][-1] / _curve()["tiled_peak"][-1]


def gpu_attention_table() -> Table | None:
    """``aiinfra bench attention`` on a GPU, or ``None`` (nothing shown).

    Shown where ``python tools/gpu.py run`` left a stamped file
    (``attention-cuda.json``): time, memory and TFLOP/s per implementation.
    """
    res = results.load_optional("attention", "cuda")
    if res is None:
        return None
    c = res["config"]
    on, fields = results.measured_on(res["stamp"])
    # Numbers and a machine only: the same in every language.
    stamp = "{dtype}, B = {batch}, H = {heads}, d = {head_dim}; " + on
    fields |= {k: c[k] for k in ("dtype", "batch", "heads", "head_dim")}
    table = attention_bench.attention_table(res)
    return replace(table, stamp=stamp, fields=fields, words=())  # impl: code names
