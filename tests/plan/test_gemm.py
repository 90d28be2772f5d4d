"""The GEMM model against hand-computed tiles, waves and rooflines.

Ground truths, worked out here by hand from the H100 SXM's datasheet numbers (989
TFLOP/s dense BF16, 3.35 TB/s, 132 SMs; FACTS.md), a 128 x 256 output tile, and
the one published point the model is fitted to: 792.1 TFLOP/s at 6144 x 17920 x
2816 (Bekman, Maximum Achievable Matmul FLOPS table). That shape has 48 x 70 =
3,360 tiles, 26 waves of 132 SMs (3,360 / 132 = 25.45), so its waves are
3,360 / 3,432 full and a full wave reaches 792.1 / 989 / (3,360 / 3,432) of peak.
"""

from __future__ import annotations

import pytest
from aiinfra.plan.gemm import ceiling, gemm_efficiency, gemm_flops, gemm_seconds, waves

PEAK, HBM, SMS = 989e12, 3.35e12, 132
FULL_WAVE = 792.1e12 / PEAK / (3360 / 3432)  # fitted ceiling, by hand: 0.81807


def test_ceiling_is_fitted_to_the_published_h100_point():
    assert ceiling("H100") == pytest.approx(FULL_WAVE, rel=1e-12)
    assert ceiling("H100") == pytest.approx(0.81807, abs=1e-5)
    assert gemm_flops(6144, 17920, 2816) == pytest.approx(792.1e12)
    # A100: 6912 x 16384 x 2048 is 54 x 64 = 3,456 tiles = 32 waves of 108, full
    assert ceiling("A100") == pytest.approx(267.9 / 312)
    assert ceiling("H200") == ceiling("H100")  # borrowed: same chip, no own row


def test_tiles_and_waves_by_hand():
    assert waves(1536, 2816, SMS) == (12 * 11, 1)  # exactly one wave
    assert waves(1537, 2816, SMS) == (13 * 11, 2)  # one tile row more: 143 tiles
    assert waves(3072, 2816, SMS) == (264, 2)  # exactly two waves
    assert waves(1, 1, SMS) == (1, 1)


def test_a_shape_that_fills_exactly_whole_waves_runs_at_the_ceiling():
    for m, n in [(1536, 2816), (3072, 2816), (1536 * 3, 2816)]:  # 1, 2, 3 waves
        assert gemm_efficiency(m, n, 8192) == pytest.approx(FULL_WAVE)


def test_one_spilled_tile_row_costs_a_whole_wave():
    # 1537 rows: 143 tiles, 2 waves, for 1537 / 1536 of one wave's useful work
    assert gemm_efficiency(1537, 2816, 8192) == pytest.approx(
        FULL_WAVE * 1537 / (2 * 1536)
    )
    # tile quantization alone: 129 x 256 takes 2 tiles of one wave of 132
    assert gemm_efficiency(129, 256, 65536) == pytest.approx(
        FULL_WAVE * 129 * 256 / (132 * 128 * 256)
    )


def test_a_thin_shape_is_memory_bound_on_the_roofline():
    m, n, k = 128, 256 * 132, 128  # one wave; 17.3 MB against 1.1 GFLOP
    memory = 2 * (m * k + k * n + m * n) / HBM
    math = 2 * 128 * 256 * k / (FULL_WAVE * PEAK / SMS)
    assert memory > math
    assert gemm_seconds(m, n, k) == pytest.approx(memory)
    assert gemm_efficiency(m, n, k) == pytest.approx(2 * m * n * k / memory / PEAK)


def test_monotonic():
    ks = [64, 256, 1024, 4096, 16384, 65536]
    eff = [gemm_efficiency(4096, 4096, k) for k in ks]
    assert eff == sorted(eff)  # more k: more FLOPs per byte and per tile
    for m in range(128, 8193, 97):  # time never falls as the output grows
        assert gemm_seconds(m + 1, 4096, 4096) >= gemm_seconds(m, 4096, 4096)
    assert all(
        gemm_efficiency(m, n, k) <= FULL_WAVE * (1 + 1e-12)
        for m in (1, 100, 1000, 10000)
        for n in (7, 700, 7000)
        for k in (5, 500, 50000)
    )


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((0, 1, 1), "m"),
        ((1, -2, 1), "n"),
        ((1, 1, 1.5), "k"),
        ((1, 1, 1, "B300"), "gpu"),
        ((1, 1, 1, "H100", "fp64"), "dtype"),
    ],
)
def test_bad_input_names_the_argument(args, name):
    with pytest.raises(ValueError, match=rf"^{name} must"):
        gemm_seconds(*args)
