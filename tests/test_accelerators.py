"""The datasheet table against the datasheets: the vendors' figures, typed here."""

import pytest
from aiinfra.accelerators import ACCELERATORS, GPUS, accelerator

# The vendors' printed figures, TFLOP/s (TOPS for int8), typed from each source URL in
# accelerators.py. "sparse" = the 2:4 figure the sheet prints (NVIDIA's H100, H200 and
# B200 sheets print only these for the tensor formats); "dense" = a figure the sheet
# prints without sparsity.
PRINTED = {
    # A100 SXM 80GB datasheet: "312 | 624*" style, dense | sparse.
    "A100": {
        "dense": {
            "fp64": 19.5,
            "fp32": 19.5,
            "tf32": 156,
            "bf16": 312,
            "fp16": 312,
            "int8": 624,
        },
        "sparse": {"tf32": 312, "bf16": 624, "fp16": 624, "int8": 1248},
    },
    # H100 SXM datasheet (tensor formats with sparsity only).
    "H100": {
        "dense": {"fp64": 67, "fp32": 67},
        "sparse": {"tf32": 989, "bf16": 1979, "fp16": 1979, "fp8": 3958, "int8": 3958},
    },
    "H200": {
        "dense": {"fp64": 67, "fp32": 67},
        "sparse": {"tf32": 989, "bf16": 1979, "fp16": 1979, "fp8": 3958, "int8": 3958},
    },
    # HGX B200 page, 8-GPU totals with sparsity, divided by 8 here: 18, 36, 72,
    # 72, 144 PFLOP/s.
    "B200": {
        "dense": {},
        "sparse": {
            "tf32": 2250,
            "bf16": 4500,
            "fp16": 4500,
            "fp8": 9000,
            "int8": 9000,
            "fp4": 18000,
        },
    },
    # AMD Instinct MI300X page: dense and "with structured sparsity".
    "MI300X": {
        "dense": {
            "fp64": 163.4,
            "fp32": 163.4,
            "tf32": 653.7,
            "bf16": 1307.4,
            "fp16": 1307.4,
            "fp8": 2614.9,
            "int8": 2614.9,
        },
        "sparse": {
            "tf32": 1307.4,
            "bf16": 2614.9,
            "fp16": 2614.9,
            "fp8": 5229.8,
            "int8": 5229.8,
        },
    },
    # Cloud TPU v5p page.
    "TPUv5p": {"dense": {"bf16": 459, "fp8": 459}, "sparse": {}},
}
GB, GIB = 10**9, 2**30
# Capacity bytes, bandwidth TB/s, scale-up GB/s both directions, watts, as printed
# (Google prints the TPU v5p's HBM as "95 GiB", binary; the others in decimal GB).
MEMORY = {
    "A100": (80 * GB, 2.039, 600, 400),
    "H100": (80 * GB, 3.35, 900, 700),
    "H200": (141 * GB, 4.8, 900, 700),
    "B200": (1440 / 8 * GB, 64 / 8, 1800, 1000),
    "MI300X": (192 * GB, 5.3, 7 * 128, 750),
    "TPUv5p": (95 * GIB, 2.765, 1200, None),
}
# GB/s between one pair of accelerators, both directions: NVLink goes through
# NVSwitches, so a pair gets all of it; the MI300X's seven Infinity Fabric links
# run one to each other GPU of the platform (AMD: 7 x 128 GB/s = 896), so a pair
# gets one link; the TPU's torus has no one pair figure.
PAIR = {"A100": 600, "H100": 900, "H200": 900, "B200": 1800, "MI300X": 128}


def test_a100_and_h200_rows_are_their_datasheets():
    # A100 SXM 80GB datasheet: BF16 312 TFLOP/s dense, 2,039 GB/s, 80 GB; 108 SMs
    # (A100 whitepaper). H200 page: 4.8 TB/s, 141 GB, Hopper's 132 SMs.
    a100, h200 = GPUS["A100"], GPUS["H200"]
    assert (a100.bf16_flops, a100.hbm_bandwidth, a100.hbm_bytes, a100.sms) == (
        312e12,
        2.039e12,
        80e9,
        108,
    )
    assert (h200.bf16_flops, h200.hbm_bandwidth, h200.hbm_bytes, h200.sms) == (
        989e12,
        4.8e12,
        141e9,
        132,
    )


def test_the_three_gpus_of_the_model_chapters_are_unchanged():
    assert list(GPUS) == ["A100", "H100", "H200"]
    assert all(GPUS[k] is ACCELERATORS[k] for k in GPUS)
    h100 = GPUS["H100"]
    assert (h100.bf16_flops, h100.hbm_bandwidth, h100.hbm_bytes, h100.sms) == (
        989e12,
        3.35e12,
        80e9,
        132,
    )


def test_roofline_bounds_a_gemv_by_memory_and_a_large_matmul_by_compute():
    # Counted by hand for bf16 (2 bytes) on an H100 SXM (989 TFLOP/s, 3.35 TB/s).
    h100, n = GPUS["H100"], 8192
    # y = W x with W n x n: 2 n^2 FLOPs over 2 n^2 bytes of W (x and y are 2n each)
    gemv = (2 * n * n) / (2 * n * n + 2 * 2 * n)
    assert h100.attainable(gemv) == pytest.approx(gemv * 3.35e12)
    assert h100.attainable(gemv) < 3.4e12  # 0.3% of the compute roof
    # C = A B, all n x n: 2 n^3 FLOPs over three n^2 matrices, n / 3 FLOP per byte
    matmul = (2 * n**3) / (3 * 2 * n * n)
    assert h100.attainable(matmul) == 989e12
    # The ridge lies between them, where the two roofs meet.
    assert gemv < h100.ridge < matmul
    assert h100.attainable(h100.ridge) == pytest.approx(989e12)


@pytest.mark.parametrize("key", sorted(PRINTED))
def test_peaks_match_the_printed_dense_and_sparse_figures(key):
    g = ACCELERATORS[key]
    for fmt, tflops in PRINTED[key]["dense"].items():
        assert g.peak(fmt) == pytest.approx(tflops * 1e12, rel=1e-3), fmt
    for fmt, tflops in PRINTED[key]["sparse"].items():
        assert g.peak(fmt, sparse=True) == pytest.approx(tflops * 1e12, rel=1e-3), fmt
    # a format the vendor quotes no sparse figure for is refused, not invented
    assert g.sparse == set(PRINTED[key]["sparse"])


@pytest.mark.parametrize("key", sorted(MEMORY))
def test_memory_links_and_power_match_the_sources(key):
    g = ACCELERATORS[key]
    capacity, bandwidth, link, watts = MEMORY[key]
    assert g.hbm_bytes == pytest.approx(capacity)
    assert g.hbm_bandwidth == pytest.approx(bandwidth * 1e12)
    assert g.scale_up_bandwidth == pytest.approx(link * 1e9)
    assert g.tdp_watts == watts
    assert g.source.startswith("https://")


@pytest.mark.parametrize("key", sorted(MEMORY))
def test_pair_bandwidth_is_one_link_without_a_switch(key):
    g = ACCELERATORS[key]
    pair = PAIR.get(key)
    assert g.pair_bandwidth == (None if pair is None else pytest.approx(pair * 1e9))
    if key == "MI300X":  # the headline is the sum of seven point-to-point links
        assert g.scale_up_bandwidth == pytest.approx(7 * g.pair_bandwidth)


def test_format_ratios_of_each_generation():
    # the printed figures, not the table: BF16 = FP16 everywhere they are printed;
    # FP8 = 2 x BF16 from Hopper on (and on MI300X); FP4 = 2 x FP8 on Blackwell;
    # TF32 = BF16 / 2; the TPU v5p runs FP8 no faster than BF16.
    for key, printed in PRINTED.items():
        both = printed["sparse"] or printed["dense"]
        if "fp16" in both:
            assert both["fp16"] == both["bf16"], key
        if key in ("H100", "H200", "B200", "MI300X"):
            assert both["fp8"] == pytest.approx(2 * both["bf16"], rel=1e-3), key
            assert both["tf32"] == pytest.approx(both["bf16"] / 2, rel=1e-3), key
    assert PRINTED["B200"]["sparse"]["fp4"] == 2 * PRINTED["B200"]["sparse"]["fp8"]
    assert PRINTED["TPUv5p"]["dense"]["fp8"] == PRINTED["TPUv5p"]["dense"]["bf16"]
    # and the table keeps them
    for g in ACCELERATORS.values():
        if g.fp16_flops is not None:
            assert g.peak("fp16") == g.peak("bf16")


def test_sparse_is_twice_dense_wherever_declared():
    # MI300X prints both: 2614.9 sparse vs 1307.4 dense BF16 (AMD rounds each).
    printed = PRINTED["MI300X"]
    for fmt, sparse in printed["sparse"].items():
        assert sparse == pytest.approx(2 * printed["dense"][fmt], rel=1e-4), fmt


def test_lookup_by_any_case_and_bad_lookups():
    assert accelerator("h100") is ACCELERATORS["H100"]
    assert accelerator("TPUV5P") is ACCELERATORS["TPUv5p"]
    with pytest.raises(ValueError, match="key must be one of"):
        accelerator("H300")
    with pytest.raises(TypeError, match="key must be a str"):
        accelerator(100)
    with pytest.raises(ValueError, match="fmt must be one of"):
        ACCELERATORS["H100"].peak("fp12")
    with pytest.raises(ValueError, match="no peak given"):
        ACCELERATORS["A100"].peak("fp8")
    with pytest.raises(ValueError, match="no peak given"):
        ACCELERATORS["TPUv5p"].peak("fp16")
    with pytest.raises(ValueError, match="quotes no 2:4 sparse"):
        ACCELERATORS["TPUv5p"].peak("bf16", sparse=True)
    with pytest.raises(ValueError, match="quotes no 2:4 sparse"):
        ACCELERATORS["A100"].peak("fp64", sparse=True)
    with pytest.raises(ValueError, match="fmt must be one of"):
        ACCELERATORS["H100"].peak_flops("int8")  # operations, not FLOPs
    assert ACCELERATORS["H100"].peak("int8") == pytest.approx(3958e12 / 2)
