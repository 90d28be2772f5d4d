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
    """

    name: str
    bf16_flops: float
    hbm_bandwidth: float
    hbm_bytes: int
    sms: int

    @property
    def ridge(self) -> float:
        """FLOP per byte at which the two roofs meet, ``F_max / W``."""
        return self.bf16_flops / self.hbm_bandwidth

    def attainable(self, intensity: float) -> float:
        """``min(F_max, I W)`` FLOP/s for a kernel of intensity ``I`` FLOP/byte."""
        return min(self.bf16_flops, intensity * self.hbm_bandwidth)


GPUS = {  # A100 SXM 80GB, H100 SXM and H200 SXM datasheets; SMs: the whitepapers
    "A100": Gpu("A100 SXM 80GB", 312e12, 2.039e12, 80 * 10**9, 108),
    "H100": Gpu("H100 SXM", 989e12, 3.35e12, 80 * 10**9, 132),
    "H200": Gpu("H200 SXM", 989e12, 4.8e12, 141 * 10**9, 132),
}
