"""Mixed precision: number formats, dynamic loss scaling, fp32 master weights.

Bit layouts and ranges derived from ``torch.finfo`` (:mod:`.formats`), what they do
to training numbers (:mod:`.numerics`), a loss scaler with ``torch.amp.GradScaler``'s
rule (:mod:`.loss_scaler`) and master weights (:mod:`.master_weights`), after
Micikevicius et al. 2018; what autocast runs in which dtype (:mod:`.autocast`) and
FP8 with per-tensor, per-tile and per-block scales (:mod:`.fp8`); :mod:`.tables`,
:mod:`.fp8_tables` and :mod:`.figures` show them.
"""

from aiinfra import lazy

# Imported on first use (aiinfra.lazy): importing the package stays light.
__getattr__, __dir__, __all__ = lazy.exports(
    __name__,
    {
        "aiinfra.precision.autocast": ("autocast_dtypes",),
        "aiinfra.precision.formats": (
            "DTYPES",
            "FloatFormat",
            "finfo_format",
            "float_format",
            "formats_table",
            "ieee_format",
            "to_tf32",
        ),
        "aiinfra.precision.fp8": (
            "DelayedScaler",
            "dequantize_fp8",
            "quantize_fp8",
        ),
        "aiinfra.precision.loss_scaler": ("DynamicLossScaler",),
        "aiinfra.precision.master_weights": ("MasterWeights",),
        "aiinfra.precision.numerics": (
            "cast",
            "numerics_table",
        ),
    },
)
