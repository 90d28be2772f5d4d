"""What ``docs/training/mixed_precision.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.precision import figures as precision_figures
from aiinfra.precision import formats, numerics
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
    return precision_tables.loss_scale_trace()


def master_weights_table() -> Table:
    """Small updates in bf16 with and without fp32 master weights."""
    return precision_tables.master_weights_table()
