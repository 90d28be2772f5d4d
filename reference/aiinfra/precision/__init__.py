"""Mixed precision: number formats, dynamic loss scaling, fp32 master weights.

Bit layouts and ranges derived from ``torch.finfo`` (:mod:`.formats`), what they do
to training numbers (:mod:`.numerics`), a loss scaler with ``torch.amp.GradScaler``'s
rule (:mod:`.loss_scaler`) and master weights (:mod:`.master_weights`), after
Micikevicius et al. 2018; what autocast runs in which dtype (:mod:`.autocast`) and
FP8 with per-tensor, per-tile and per-block scales (:mod:`.fp8`); :mod:`.tables`,
:mod:`.fp8_tables` and :mod:`.figures` show them.
"""

from aiinfra.precision.autocast import autocast_dtypes
from aiinfra.precision.formats import (
    DTYPES,
    FloatFormat,
    finfo_format,
    float_format,
    formats_table,
    ieee_format,
    to_tf32,
)
from aiinfra.precision.fp8 import DelayedScaler, dequantize_fp8, quantize_fp8
from aiinfra.precision.loss_scaler import DynamicLossScaler
from aiinfra.precision.master_weights import MasterWeights
from aiinfra.precision.numerics import cast, numerics_table

__all__ = [
    "DTYPES",
    "DelayedScaler",
    "autocast_dtypes",
    "dequantize_fp8",
    "quantize_fp8",
    "DynamicLossScaler",
    "FloatFormat",
    "MasterWeights",
    "cast",
    "finfo_format",
    "float_format",
    "formats_table",
    "ieee_format",
    "numerics_table",
    "to_tf32",
]
