"""What ``docs/training/mixed_precision.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from dataclasses import replace

from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.precision import autocast, formats, fp8_tables, numerics
from aiinfra.precision import figures as precision_figures
from aiinfra.precision import tables as precision_tables
from aiinfra.precision.formats import float_format, ieee_format
from aiinfra.report import Table


def fp8_e4m3_max() -> float:
    """The largest fp8 e4m3 (OCP, no infinities) value, from ``torch.finfo``."""
    return float_format("fp8 e4m3").max


def ieee_e4m3_max() -> float:
    """The largest value an IEEE-style e4m3 (with infinities) would have."""
    return ieee_format("e4m3", 4, 3).max


def fp16_max() -> float:
    """The largest fp16 value."""
    return float_format("fp16").max


def fp16_min_subnormal() -> float:
    """The smallest positive fp16 value (a subnormal)."""
    return float_format("fp16").min_subnormal


def bit_layout_figure() -> Figure:
    """Sign, exponent and mantissa bits of every format."""
    return precision_figures.bit_layout_figure()


def formats_table() -> Table:
    """Range and precision of every format."""
    return formats.formats_table()


def numerics_table() -> Table:
    """What each format does to values across the range."""
    return numerics.numerics_table()


def rounding_table() -> Table:
    """1 + eps/2 and 1 + a little more, added in fp32, bf16 and fp16."""
    return numerics.rounding_table()


def loss_scale_trace() -> Table:
    """Our loss scaler step by step beside ``torch.amp.GradScaler``."""
    # the stepped/skipped columns are words
    return replace(precision_tables.loss_scale_trace(), words=(0, 2, 3))


def master_weights_table() -> Table:
    """Small updates in bf16 with and without fp32 master weights."""
    return precision_tables.master_weights_table()


def autocast_table() -> Table:
    """Each op's output dtype under CPU autocast, beside its CUDA list."""
    return replace(autocast.autocast_table(), words=(0, 2))  # 2: the CUDA list


def h100_peak_tflops(fmt: str) -> float:
    """The H100 SXM's dense peak of a format, TFLOP/s (``"fp32"`` ... ``"fp8"``)."""
    return GPUS["H100"].peak_flops(fmt) / 1e12


def matmul_format_table() -> Table:
    """Matmul error with inputs in each format, beside the H100's peak."""
    return fp8_tables.matmul_format_table("H100")


def fp8_granularity_table() -> Table:
    """E4M3 error per scaling granularity of an activation with outliers."""
    return fp8_tables.granularity_table(FP8_OUTLIER)


def fp8_granularity_figure() -> Figure:
    """Error on ordinary channels against granularity, per outlier magnitude."""
    return fp8_tables.granularity_figure()


def fp8_ordinary_error_percent(granularity: int) -> float:
    """Error on ordinary channels, percent; 0: per tensor, 3: 1x128 tiles."""
    names = list(fp8_tables.GRANULARITIES)
    return 100 * fp8_tables.granularity_stats(FP8_OUTLIER)[names[granularity]][1]


def fp8_below_normal_percent(granularity: int) -> float:
    """Ordinary values cast below E4M3's smallest normal, percent (0: per tensor)."""
    names = list(fp8_tables.GRANULARITIES)
    return 100 * fp8_tables.granularity_stats(FP8_OUTLIER)[names[granularity]][2]


def e4m3_normal_range() -> float:
    """Largest over smallest normal E4M3 value, 448 / 2^-6."""
    e4m3 = float_format("fp8 e4m3")
    return e4m3.max / e4m3.min_normal


def fp8_outlier_magnitude() -> float:
    """How much larger the outlier channels are in the table."""
    return FP8_OUTLIER


def fp8_delayed_table() -> Table:
    """Delayed against current per-tensor scaling on a tensor that jumps."""
    return fp8_tables.delayed_scaling_table()


FP8_OUTLIER = 1e4  # outlier channels' size over the ordinary ones in the table
