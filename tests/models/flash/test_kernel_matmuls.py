"""Matrix products counted in the kernels' source, against FlopCounterMode and FA2."""

import pytest
import torch
from aiinfra.models.flash.attention import tiled_backward, tiled_forward
from aiinfra.models.flash.kernel_matmuls import (
    backward_figure,
    backward_matmuls,
    backward_table,
    count_matmuls,
)
from torch.utils.flop_counter import FlopCounterMode


def _products_per_tile(fn, *args) -> float:
    """FLOPs FlopCounterMode counts for one tile, over 2 B_r B_c d per product."""
    with FlopCounterMode(display=False) as counter:
        fn(*args)
    n, d = args[0].shape[2], args[0].shape[3]
    return counter.get_total_flops() / (2 * n * n * d)


def test_counts_of_the_pytorch_passes_equal_flop_counter_mode():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 8, 4, generator=g) for _ in range(3))
    o, lse = tiled_forward(q, k, v, False, 0.5, 8, 8)  # one 8 x 8 tile
    do = torch.randn(o.shape, generator=g)
    assert _products_per_tile(tiled_forward, q, k, v, False, 0.5, 8, 8) == (
        count_matmuls(tiled_forward)
    )
    assert _products_per_tile(
        tiled_backward, q, k, v, o, lse, do, False, 0.5, 8, 8
    ) == (count_matmuls(tiled_backward))


def test_counts_match_flashattention2_and_the_triton_tutorial():
    # FlashAttention-2 (Dao 2023, Sec. 4.1): 2 matmuls forward, 5 backward "due to
    # recomputation". Triton's 06-fused-attention: _attn_bwd_dkdv takes 4 tl.dot,
    # _attn_bwd_dq 3.
    n = backward_matmuls()
    assert (n["forward"], n["one kernel"]) == (2, 5)
    assert (n["dK dV kernel"], n["dQ kernel"], n["two kernels"]) == (4, 3, 7)


def test_count_reads_every_kind_of_product():
    def kernel(a, b, tl):
        x = a @ b
        for _ in range(3):
            x = tl.dot(x, b) + torch.matmul(a, b)  # a loop body counts once
        return (x * 2).sum()  # not a product

    assert count_matmuls(kernel) == 3


def test_table_prices_the_two_kernels_at_40_percent():
    rows = backward_table().rows
    assert rows[2][3] == "1.40" and rows[2][4] == "1.50" and rows[1][4] == "1.17"


def test_a_function_without_source_is_rejected():
    with pytest.raises(TypeError, match="fn must be a Python function"):
        count_matmuls(len)


def test_figure_stacks_the_published_totals_per_tile():
    # PaLM (Chowdhery et al. 2022, App. B): 6 products; FlashAttention-2: 2 + 5;
    # Triton's tutorial: 2 + 4 + 3.
    ax = backward_figure().axes[0]
    widths = {}
    for bar in ax.patches:
        y = round(bar.get_y() + bar.get_height() / 2)
        widths[y] = widths.get(y, 0) + bar.get_width()
    assert [widths[y] for y in sorted(widths)] == [6, 7, 9]
