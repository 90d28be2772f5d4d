"""FP8 scaling against a brute-force E4M3 rounding built from the format definition."""

import pytest
import torch
from aiinfra.accelerators import GPUS
from aiinfra.precision.fp8 import (
    DelayedScaler,
    block_amax,
    dequantize_fp8,
    quantize_fp8,
    relative_error,
)
from aiinfra.precision.fp8_tables import (
    activations_with_outliers,
    delayed_scaling_table,
    granularity_figure,
    granularity_stats,
    granularity_table,
    matmul_format_table,
)
from matplotlib.figure import Figure


@pytest.fixture(autouse=True)
def one_thread():
    """Small elementwise ops: two intra-op threads only contend on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def e4m3_grid() -> torch.Tensor:
    """Every non-negative finite E4M3 value, indexed by its 7-bit code.

    OCP FP8 / Micikevicius et al. 2022: 4 exponent bits, bias 7, 3 mantissa bits;
    exponent 0 is subnormal, m/8 x 2^-6; S.1111.111 is NaN; no infinity.
    """
    values = []
    for code in range(127):  # 127 = 0b1111111 is NaN
        e, m = code >> 3, code & 7
        values.append(m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return torch.tensor(values, dtype=torch.float64)


def brute_force_e4m3(x: torch.Tensor) -> torch.Tensor:
    """Nearest E4M3 value of each |x| <= 448, ties to the even code."""
    grid = e4m3_grid()
    dist = (x.double().abs().reshape(-1, 1) - grid).abs()  # (n, 127)
    nearest = dist == dist.min(dim=1, keepdim=True).values
    even = torch.arange(127) % 2 == 0
    code = torch.where(nearest & even, 0, 1).argmin(dim=1)  # an even tie if any
    code = torch.where((nearest & even).any(dim=1), code, nearest.int().argmax(dim=1))
    return (grid[code] * x.double().sign().reshape(-1)).reshape(x.shape)


def test_grid_matches_the_published_range():
    grid = e4m3_grid()
    assert grid.max() == 448 and grid[1] == 2.0**-9 and grid[8] == 2.0**-6


def test_torch_cast_matches_brute_force_rounding_including_ties():
    g = torch.Generator().manual_seed(0)
    grid = e4m3_grid()
    midpoints = (grid[1:] + grid[:-1]) / 2  # every tie
    random = torch.exp(torch.empty(2000).uniform_(-12, 6.1, generator=g))  # 6e-6..446
    x = torch.cat([midpoints, random.double(), -random.double()]).float()
    x = x[x.abs() <= 448]
    assert torch.equal(x.to(torch.float8_e4m3fn).double(), brute_force_e4m3(x))


@pytest.mark.parametrize("block", [None, (1, 128), (128, 128), (1, -1)])
def test_blocked_quantisation_rounds_each_block_by_its_own_amax(block):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(128, 256, generator=g)  # (T, C)
    x[:, 7] *= 1e3  # an outlier channel
    x[5, 200] = -3e4  # and one massive value
    q, sigma = quantize_fp8(x, block)
    br = 128 if block is None else block[0]
    bc = 256 if block is None or block[1] == -1 else block[1]
    scaled = torch.empty_like(x)
    for i in range(0, 128, br):  # explicit loops, one block at a time
        for j in range(0, 256, bc):
            s = x[i : i + br, j : j + bc].abs().max() / 448
            assert sigma[i // br, j // bc] == s
            scaled[i : i + br, j : j + bc] = x[i : i + br, j : j + bc] / s
    assert torch.equal(q.double(), brute_force_e4m3(scaled))


def test_error_of_each_element_is_within_half_an_ulp():
    x = activations_with_outliers(1e4, tokens=64, channels=512)
    q, sigma = quantize_fp8(x, (1, 128))
    s = sigma.repeat_interleave(128, 1)  # (T, C)
    err = (dequantize_fp8(q, sigma) - x).abs()
    # 3 mantissa bits: half an ulp is 2^-4 of a normal value; below 2^-6 (the
    # smallest normal) the spacing is 2^-9, so half of it is 2^-10.
    bound = torch.maximum(x.abs() * 2.0**-4, s * 2.0**-10)
    assert (err <= bound * (1 + 1e-6)).all()


def test_fine_tiles_shield_ordinary_channels_from_outliers():
    errors = granularity_stats(1e4, tokens=128)
    tensor, token = errors["per tensor"][1], errors["per token (1 x C)"][1]
    block, tile = errors["128x128 block"][1], errors["1x128 tile"][1]
    assert tile < block < tensor and tile < token
    clean = granularity_stats(1.0, tokens=128)  # no outliers: all about equal
    values = [ordinary for _, ordinary, _ in clean.values()]
    assert max(values) < 1.2 * min(values)


def test_delayed_scaling_clips_a_jump_that_current_scaling_does_not():
    g = torch.Generator().manual_seed(1)
    small, big = torch.randn(8, 8, generator=g), 10 * torch.randn(8, 8, generator=g)
    scaler = DelayedScaler(history_len=2)
    scaler.quantize(small)
    q, sigma = scaler.quantize(big)  # the scale of the small tensor
    x_hat = dequantize_fp8(q, sigma)
    assert torch.isclose(x_hat.abs().max(), small.abs().max(), rtol=1e-6)
    scaler.quantize(small)
    scaler.quantize(small)  # the big amax has left the 2-step history
    assert scaler.history == [small.abs().max().item()] * 2
    rows = delayed_scaling_table().rows
    assert rows[3][2] != "0.0%" and rows[4][2] == "0.0%"


def test_matmul_error_grows_as_mantissa_bits_fall_and_peaks_follow_datasheet():
    rows = {r[0]: r for r in matmul_format_table().rows}
    # H100 SXM datasheet prints TF32 989, BF16/FP16 1979, FP8 3958 TFLOP/s with
    # 2:4 sparsity (dense: half) and FP32 67 TFLOP/s.
    assert [rows[n][2] for n in rows] == ["67", "494.5", "989", "989", "1979"]
    for name, row in rows.items():
        if name != "fp32":  # rounding both inputs: error ~ 2^-M / 2, within 4x
            assert 2.0 ** -row[1] / 8 < float(row[4]) < 2.0 ** -row[1]
    assert float(rows["fp32"][4]) < 1e-6


def test_granularity_table_counts_groups_shared_with_outliers():
    rows = granularity_table(tokens=128).rows
    assert [r[1] for r in rows] == [128 * 512, 512, 128 * 128, 128]
    # 4 tiles of 128 channels; outlier channels in tiles 0 and 2, one massive
    # value in token 0's tile 1 (which a 128x128 block spreads over 128 tokens).
    ordinary = 128 * 512 - (2 * 128 + 1)  # two outlier channels, one massive value
    blocks = (3 * 128 * 128 - (2 * 128 + 1)) / ordinary  # 3 of 4 blocks
    tiles = (2 * 128 * 128 + 128 - (2 * 128 + 1)) / ordinary
    expected = ["100.0%", "100.0%", f"{blocks:.1%}", f"{tiles:.1%}"]
    assert [r[2] for r in rows] == expected
    # one scale per tensor: amax ~ 4e4, so ordinary |x| < 4e4 / 448 * 2^-6 ~ 1.4
    # fall below E4M3's smallest normal, most of a standard normal's mass.
    # 1x128 tiles: only the polluted quarter of the ordinary values is pushed down.
    below = [float(r[3].rstrip("%")) for r in rows]
    assert below[0] > 60 and below[3] < 10


def test_figure_and_peaks():
    assert isinstance(granularity_figure((1e4,), tokens=128), Figure)
    assert GPUS["A100"].peak_flops("bf16") == GPUS["A100"].peak_flops("fp16")


def test_bad_input_is_rejected():
    with pytest.raises(TypeError, match="2-D floating-point"):
        quantize_fp8(torch.ones(4))
    with pytest.raises(ValueError, match="must tile x"):
        block_amax(torch.ones(4, 6), (1, 4))
    with pytest.raises(ValueError, match="must divide q"):
        dequantize_fp8(torch.ones(4, 4).to(torch.float8_e4m3fn), torch.ones(3, 1))
    with pytest.raises(ValueError, match="differ"):
        relative_error(torch.ones(2), torch.ones(3))
    with pytest.raises(ValueError, match="history_len"):
        DelayedScaler(0)
    with pytest.raises(ValueError, match="magnitude"):
        activations_with_outliers(0.0)
    with pytest.raises(ValueError, match="fmt must be"):
        GPUS["H100"].peak_flops("int8")
    with pytest.raises(ValueError, match="no peak given"):
        GPUS["A100"].peak_flops("fp8")
