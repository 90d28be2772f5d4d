"""The tiled Triton matmul against torch.matmul; its traffic against a count."""

import itertools
import math

import pytest
import torch

pytest.importorskip("triton")  # optional (the test extra installs it): skip without
from aiinfra.hardware import matmul_triton as mt  # noqa: E402


def _operands(m, k, n, dtype=torch.float32, device="cpu", seed=0):
    g = torch.Generator(device).manual_seed(seed)
    a = torch.randn(m, k, generator=g, device=device)  # (M, K)
    b = torch.randn(k, n, generator=g, device=device)  # (K, N)
    return a.to(dtype), b.to(dtype)


@pytest.mark.parametrize(
    "m, k, n, blocks",
    [(37, 50, 29, (16, 16, 16)), (16, 16, 16, (16, 16, 16)), (5, 97, 33, (32, 16, 32))],
)
def test_fp32_matches_torch_matmul_on_ragged_shapes(m, k, n, blocks):
    a, b = _operands(m, k, n)
    c = mt.matmul_triton(a, b, *blocks)
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-5)


def test_fp16_is_at_most_twice_as_wrong_as_torch():
    a, b = _operands(33, 40, 18, torch.float16)
    exact = a.double() @ b.double()  # the fp32 reference of the fp16 inputs
    ours = (mt.matmul_triton(a, b).double() - exact).abs().max()
    torch_err = (torch.matmul(a, b).double() - exact).abs().max()
    assert mt.matmul_triton(a, b).dtype == torch.float16
    assert ours <= 2 * torch_err + 1e-6


def _brute_force_elements(m, n, k, bm, bn, bk):
    """Walk the kernel's loops and count the unmasked loads and stores."""
    loaded = 0
    for i, j in itertools.product(range(math.ceil(m / bm)), range(math.ceil(n / bn))):
        rows = sum(1 for r in range(i * bm, (i + 1) * bm) if r < m)
        cols = sum(1 for c in range(j * bn, (j + 1) * bn) if c < n)
        for k0 in range(0, k, bk):
            ks = sum(1 for kk in range(k0, k0 + bk) if kk < k)
            loaded += rows * ks + ks * cols  # the tiles of A and B
        loaded += rows * cols  # the tile of C, stored once
    return loaded


@pytest.mark.parametrize(
    "m, n, k, bm, bn, bk",
    [(37, 50, 29, 16, 16, 16), (64, 64, 64, 32, 16, 64), (100, 3, 257, 64, 32, 16)],
)
def test_tile_traffic_equals_a_count_of_the_loop(m, n, k, bm, bn, bk):
    kernel = mt.tile_traffic(m, n, k, bm, bn, bytes_per_element=2)
    assert kernel.bytes == 2 * _brute_force_elements(m, n, k, bm, bn, bk)
    assert kernel.flops == 2 * m * n * k


def test_bigger_tiles_raise_intensity_towards_block_over_bytes():
    n = 4096
    intensities = [mt.tile_traffic(n, n, n, t, t).intensity for t in (16, 32, 64, 128)]
    assert intensities == sorted(intensities)
    # square tiles of side t, bf16: 2 n^3 FLOPs over 2 (2 n^3 / t + n^2) bytes
    assert intensities[-1] == pytest.approx(128 / 2, rel=0.02)


@pytest.mark.parametrize(
    "args, error",
    [
        ((torch.ones(2, 3), torch.ones(4, 2)), ValueError),
        ((torch.ones(2, 3, 1), torch.ones(3, 2)), ValueError),
        ((torch.ones(2, 3, dtype=torch.int32), torch.ones(3, 2)), TypeError),
        ((torch.ones(2, 3), torch.ones(3, 2, dtype=torch.float16)), ValueError),
        ((torch.ones(2, 3), torch.ones(3, 2), 24), ValueError),
        ((torch.ones(2, 3), torch.ones(3, 2), 16, 16, 8), ValueError),
    ],
)
def test_bad_input_is_rejected(args, error):
    with pytest.raises(error):
        mt.matmul_triton(*args)


def test_tile_traffic_rejects_a_zero_size():
    with pytest.raises(ValueError, match="block_m"):
        mt.tile_traffic(8, 8, 8, 0, 16)


@pytest.mark.gpu
def test_bf16_at_full_size_is_at_most_twice_as_wrong_as_torch():
    a, b = _operands(4096, 4096, 4096, torch.bfloat16, "cuda")
    exact = a.float() @ b.float()
    ours = (mt.matmul_triton(a, b, 128, 128, 64).float() - exact).abs().max()
    theirs = (torch.matmul(a, b).float() - exact).abs().max()
    assert ours <= 2 * theirs
