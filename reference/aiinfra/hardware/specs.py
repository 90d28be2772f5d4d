"""Accelerators as their datasheets describe them: the one table of GPU numbers.

The roofline (:mod:`aiinfra.models.roofline`), the KV budget
(:mod:`aiinfra.models.kv_budget`) and the overlap bound
(:mod:`aiinfra.parallel.overlap_bound`) read their peaks from here, so a corrected
datasheet number changes every page that uses it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    """One accelerator's datasheet numbers.

    Args:
        name: as the datasheet names it.
        bf16_flops: dense BF16 tensor-core peak, FLOP/s (not the 2:4 sparse one).
        hbm_bandwidth: HBM bandwidth, bytes/s.
        hbm_bytes: HBM capacity, bytes (decimal GB, as printed: "80 GB").
        sms: streaming multiprocessors.
        fp32_flops: FP32 peak without tensor cores, FLOP/s; ``None``: not given.
        tf32_flops: dense TF32 tensor-core peak, FLOP/s; ``None``: not given.
        fp8_flops: dense FP8 tensor-core peak, FLOP/s; ``None`` before Hopper.
    """

    name: str
    bf16_flops: float
    hbm_bandwidth: float
    hbm_bytes: int
    sms: int
    fp32_flops: float | None = None
    tf32_flops: float | None = None
    fp8_flops: float | None = None

    def peak_flops(self, fmt: str) -> float:
        """Dense peak FLOP/s of a number format (FP16 runs at the BF16 rate).

        Args:
            fmt: ``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"`` or ``"fp8"``.

        Returns:
            FLOP/s, as the datasheet prints it (halved where it prints 2:4 sparse).

        Raises:
            ValueError: an unknown format, or one whose peak is not given (FP8
                before Hopper).
        """
        peaks = {
            "fp32": self.fp32_flops,
            "tf32": self.tf32_flops,
            "bf16": self.bf16_flops,
            "fp16": self.bf16_flops,
            "fp8": self.fp8_flops,
        }
        if fmt not in peaks:
            raise ValueError(f"fmt must be one of {list(peaks)}, got {fmt!r}")
        peak = peaks[fmt]
        if peak is None:
            raise ValueError(f"fmt={fmt!r}: no peak given for the {self.name}")
        return peak

    @property
    def ridge(self) -> float:
        """FLOP per byte at which the two roofs meet, ``F_max / W``."""
        return self.bf16_flops / self.hbm_bandwidth

    def attainable(self, intensity: float) -> float:
        """``min(F_max, I W)`` FLOP/s for a kernel of intensity ``I`` FLOP/byte."""
        return min(self.bf16_flops, intensity * self.hbm_bandwidth)


# A100 SXM 80GB, H100 SXM and H200 SXM datasheets; SMs: the whitepapers. The
# H100/H200 datasheets print TF32, BF16 and FP8 with 2:4 sparsity; dense is half.
#: The accelerators by name (``"H100"``): dense peaks per format, HBM, links.
GPUS = {
    "A100": Gpu(
        "A100 SXM 80GB", 312e12, 2.039e12, 80 * 10**9, 108, 19.5e12, 156e12, None
    ),
    "H100": Gpu("H100 SXM", 989e12, 3.35e12, 80 * 10**9, 132, 67e12, 494.5e12, 1979e12),
    "H200": Gpu("H200 SXM", 989e12, 4.8e12, 141 * 10**9, 132, 67e12, 494.5e12, 1979e12),
}
