"""Accelerators as their datasheets describe them: the one table of accelerator numbers.

The roofline (:mod:`aiinfra.models.roofline`), the KV budget
(:mod:`aiinfra.models.kv_budget`) and the overlap bound
(:mod:`aiinfra.parallel.data.overlap`) read their peaks from here, so a corrected
datasheet number changes every page that uses it. Every peak is *dense*: where a
vendor prints the 2:4 structured-sparsity figure as the headline (NVIDIA's H100,
H200 and B200 sheets), the table stores half of it and lists the format in
``sparse``, so that :meth:`Gpu.peak` can give the vendor's sparse figure back as
twice the dense one. :data:`ACCELERATORS` holds every accelerator the book compares;
:data:`GPUS` the three NVIDIA GPUs that the model and inference chapters use. The
table is ground floor: it imports no chapter package, so every one may read it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

#: Number formats with a peak in the table; ``int8`` counts operations, not FLOPs.
FORMATS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")
_FLOAT_FORMATS = FORMATS[:-1]


@dataclass(frozen=True)
class Gpu:
    """One accelerator's datasheet numbers (a GPU, or a TPU / NPU chip).

    Args:
        name: as the datasheet names it.
        bf16_flops: dense BF16 tensor-core (matrix-unit) peak, FLOP/s.
        hbm_bandwidth: HBM bandwidth, bytes/s.
        hbm_bytes: HBM capacity, bytes, in the unit printed: decimal ("80 GB" =
            80e9) or binary (the TPU v5p's "95 GiB" = 95 x 2^30).
        sms: streaming multiprocessors; ``None`` for non-NVIDIA chips.
        fp32_flops: FP32 peak without tensor cores, FLOP/s; ``None``: not given.
        tf32_flops: dense TF32 tensor-core peak, FLOP/s; ``None``: not given.
        fp8_flops: dense FP8 tensor-core peak, FLOP/s; ``None`` before Hopper.
        fp64_flops: the highest FP64 peak printed (tensor core / matrix), FLOP/s.
        fp16_flops: dense FP16 tensor-core peak, FLOP/s.
        fp4_flops: dense FP4 tensor-core peak, FLOP/s (Blackwell on).
        int8_ops: dense INT8 tensor-core peak, operations/s.
        sparse: formats whose 2:4 sparse peak the vendor quotes (twice the dense).
        scale_up: the GPU-to-GPU link (``"NVLink 4"``).
        scale_up_bandwidth: that link's bandwidth per accelerator, both directions
            together, bytes/s: the sum over all its links.
        pair_bandwidth: what one pair of accelerators gets between them, both
            directions, bytes/s: all of ``scale_up_bandwidth`` through a switch
            (NVLink), one link's share point to point (MI300X); ``None``: not
            a single figure (a torus routes through neighbours).
        tdp_watts: maximum board power, W; ``None``: not published.
        vendor: ``"NVIDIA"``, ``"AMD"``, ``"Google"``, ``"Huawei"``.
        year: the year the vendor announced it.
        source: the datasheet's URL.
    """

    name: str
    bf16_flops: float
    hbm_bandwidth: float
    hbm_bytes: int
    sms: int | None
    fp32_flops: float | None = None
    tf32_flops: float | None = None
    fp8_flops: float | None = None
    fp64_flops: float | None = None
    fp16_flops: float | None = None
    fp4_flops: float | None = None
    int8_ops: float | None = None
    sparse: frozenset[str] = frozenset()
    scale_up: str = ""
    scale_up_bandwidth: float | None = None
    pair_bandwidth: float | None = None
    tdp_watts: float | None = None
    vendor: str = "NVIDIA"
    year: int | None = None
    source: str = ""

    def peak(self, fmt: str, sparse: bool = False) -> float:
        """Peak operations per second of a format, dense or 2:4 sparse.

        Args:
            fmt: one of :data:`FORMATS`.
            sparse: the vendor's 2:4 structured-sparsity figure (twice the dense).

        Returns:
            FLOP/s (operations/s for ``"int8"``).

        Raises:
            ValueError: an unknown format, one whose peak is not given, or a sparse
                peak the vendor does not quote for this format.
        """
        if fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {list(FORMATS)}, got {fmt!r}")
        dense = {
            "fp64": self.fp64_flops,
            "fp32": self.fp32_flops,
            "tf32": self.tf32_flops,
            "bf16": self.bf16_flops,
            "fp16": self.fp16_flops,
            "fp8": self.fp8_flops,
            "fp4": self.fp4_flops,
            "int8": self.int8_ops,
        }[fmt]
        if dense is None:
            raise ValueError(f"fmt={fmt!r}: no peak given for the {self.name}")
        if sparse and fmt not in self.sparse:
            raise ValueError(
                f"sparse=True: the {self.name} datasheet quotes no 2:4 sparse "
                f"{fmt} peak (sparse formats: {sorted(self.sparse)})"
            )
        return 2 * dense if sparse else dense

    def peak_flops(self, fmt: str) -> float:
        """Dense peak FLOP/s of a floating-point format (not ``int8``).

        Args:
            fmt: ``"fp64"``, ``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"``,
                ``"fp8"`` or ``"fp4"``.

        Returns:
            FLOP/s, as the datasheet prints it (halved where it prints 2:4 sparse).

        Raises:
            ValueError: an unknown format, or one whose peak is not given (FP8
                before Hopper).
        """
        if fmt not in _FLOAT_FORMATS:
            raise ValueError(f"fmt must be one of {list(_FLOAT_FORMATS)}, got {fmt!r}")
        return self.peak(fmt)

    @property
    def ridge(self) -> float:
        """FLOP per byte at which the two roofs meet, ``F_max / W``."""
        return self.bf16_flops / self.hbm_bandwidth

    def attainable(self, intensity: float) -> float:
        """``min(F_max, I W)`` FLOP/s for a kernel of intensity ``I`` FLOP/byte."""
        return min(self.bf16_flops, intensity * self.hbm_bandwidth)


_HOPPER_SPARSE = frozenset({"tf32", "bf16", "fp16", "fp8", "int8"})

# H100 / H200 SXM datasheets print TF32, BF16, FP16, FP8, INT8 with sparsity
# (989, 1979, 1979, 3958, 3958): dense is half (BF16 kept at 989 as printed
# elsewhere in the whitepaper; 1979 / 2 = 989.5). SMs: the Hopper whitepaper.
_H100 = Gpu(
    "H100 SXM",
    989e12,
    3.35e12,
    80 * 10**9,
    132,
    67e12,
    494.5e12,
    1979e12,
    fp64_flops=67e12,
    fp16_flops=989e12,
    int8_ops=1979e12,
    sparse=_HOPPER_SPARSE,
    scale_up="NVLink 4",
    scale_up_bandwidth=900e9,
    pair_bandwidth=900e9,  # switched: any pair gets the whole link
    tdp_watts=700,
    year=2022,
    source="https://www.nvidia.com/en-us/data-center/h100/",
)

# region table
#: Every accelerator the book compares, by key (``"H100"``): dense peaks per format.
ACCELERATORS = {
    # A100 SXM 80GB datasheet: dense figures, sparse marked with an asterisk.
    "A100": Gpu(
        "A100 SXM 80GB",
        312e12,
        2.039e12,
        80 * 10**9,
        108,
        19.5e12,
        156e12,
        None,
        fp64_flops=19.5e12,
        fp16_flops=312e12,
        int8_ops=624e12,
        sparse=frozenset({"tf32", "bf16", "fp16", "int8"}),
        scale_up="NVLink 3",
        scale_up_bandwidth=600e9,
        pair_bandwidth=600e9,  # switched: any pair gets the whole link
        tdp_watts=400,
        year=2020,
        source="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/"
        "pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    ),
    "H100": _H100,
    # The H100's chip with HBM3e: more and faster memory, the same peaks.
    "H200": replace(
        _H100,
        name="H200 SXM",
        hbm_bandwidth=4.8e12,
        hbm_bytes=141 * 10**9,
        year=2023,
        source="https://www.nvidia.com/en-us/data-center/h200/",
    ),
    # HGX B200, per GPU (the HGX page prints 8-GPU totals with sparsity: FP4 144 PF,
    # FP8 72 PF, INT8 72 POPS, BF16 36 PF, TF32 18 PF; 1,440 GB and 64 TB/s HBM3e).
    # Unsure: FP32/FP64 (HGX totals give 75/37 TFLOP/s per GPU, the Blackwell
    # datasheet as quoted elsewhere 80/40), so they are left out; 180 GB is the HGX
    # B200's usable HBM (other NVIDIA pages print 192 GB for the chip). 1000 W: the
    # HGX B200 board power as NVIDIA's Blackwell datasheet gives it.
    "B200": Gpu(
        "B200 (HGX)",
        2.25e15,
        8e12,
        180 * 10**9,
        None,
        None,
        1.125e15,
        4.5e15,
        fp16_flops=2.25e15,
        fp4_flops=9e15,
        int8_ops=4.5e15,
        sparse=frozenset({"tf32", "bf16", "fp16", "fp8", "fp4", "int8"}),
        scale_up="NVLink 5",
        scale_up_bandwidth=1.8e12,
        pair_bandwidth=1.8e12,  # switched: any pair gets the whole link
        tdp_watts=1000,
        year=2024,
        source="https://www.nvidia.com/en-us/data-center/hgx/",
    ),
    # AMD prints dense and sparse (2:4) peaks side by side; FP64 = matrix, FP32 =
    # vector. Scale-up: 7 Infinity Fabric links x 128 GB/s, one to each other GPU
    # of the 8-GPU platform, no switch: AMD's 896 GB/s is the sum over the seven
    # links; one pair of GPUs has one link, 128 GB/s (64 GB/s each way).
    # 304 compute units (not SMs, so sms is None); 750 W typical board power.
    "MI300X": Gpu(
        "Instinct MI300X",
        1307.4e12,
        5.3e12,
        192 * 10**9,
        None,
        163.4e12,
        653.7e12,
        2614.9e12,
        fp64_flops=163.4e12,
        fp16_flops=1307.4e12,
        int8_ops=2614.9e12,
        sparse=_HOPPER_SPARSE,
        scale_up="Infinity Fabric",
        scale_up_bandwidth=896e9,
        pair_bandwidth=128e9,
        tdp_watts=750,
        vendor="AMD",
        year=2023,
        source="https://www.amd.com/en/products/accelerators/instinct/mi300/"
        "mi300x.html",
    ),
    # Cloud TPU v5p page: 459 TFLOP/s BF16 (FP8 printed at the same 459), 95 GiB
    # HBM2e at 2,765 GB/s, ICI 1,200 GB/s per chip both directions (an older
    # version of the page printed "4800 Gbps" and "95 GB"; the current one
    # prints "95 GiB", kept as binary: 102 GB). No TDP published.
    "TPUv5p": Gpu(
        "TPU v5p",
        459e12,
        2.765e12,
        95 * 2**30,
        None,
        fp8_flops=459e12,
        scale_up="ICI (3D torus)",
        scale_up_bandwidth=1.2e12,
        vendor="Google",
        year=2023,
        source="https://cloud.google.com/tpu/docs/v5p",
    ),
}
# endregion

#: The NVIDIA GPUs that the model and inference chapters compare, by key.
GPUS = {key: ACCELERATORS[key] for key in ("A100", "H100", "H200")}

# region npus
#: Huawei's Ascend NPUs, by key, each field from the source in its record's comment.
#: Kept apart from :data:`ACCELERATORS` (whose pages compare vendors' datasheets):
#: Huawei publishes no per-chip datasheet, so these come from a paper.
NPUS = {
    # Zuo et al., "Serving Large Language Models on Huawei CloudMatrix384" (arXiv
    # 2506.12708, 2025), section 3: a 910C package is two dies; together 752 TFLOP/s
    # dense BF16/FP16, 128 GB of HBM at 3.2 TB/s, 392 GB/s of UB (the supernode's
    # scale-up bus) each way and 400 Gb/s of RDMA each way. No FP8, no FP32, no
    # power in the paper: left out. The 910B is left out: no Huawei source prints
    # its peaks, and third-party figures disagree (256 to 400 TFLOP/s FP16).
    "910C": Gpu(
        "Ascend 910C",
        752e12,
        3.2e12,
        128 * 10**9,
        None,
        fp16_flops=752e12,
        scale_up="UB",
        scale_up_bandwidth=2 * 392e9,  # both directions, as every record
        vendor="Huawei",
        source="https://arxiv.org/abs/2506.12708",
    ),
}
# endregion


def accelerator(key: str) -> Gpu:
    """The accelerator of a key of :data:`ACCELERATORS`, any case (``"h100"``).

    Raises:
        TypeError: ``key`` is not a string.
        ValueError: no accelerator of that key.
    """
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")
    found = {k.lower(): g for k, g in ACCELERATORS.items()}.get(key.lower())
    if found is None:
        raise ValueError(f"key must be one of {sorted(ACCELERATORS)}, got {key!r}")
    return found
