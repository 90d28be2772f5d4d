"""Measured memory: standard attention grows like N^2, tiled attention like N."""

import pytest
import torch
from aiinfra.models.flash.attention import standard_attention
from aiinfra.models.flash.memory import (
    PeakMemory,
    growth_exponent,
    memory_curve,
    memory_figure,
    memory_table,
    peak_and_saved_bytes,
    peak_bytes,
    saved_bytes,
    tiled,
)
from matplotlib.figure import Figure

NS = (128, 256, 512, 1024)


@pytest.fixture(scope="module")
def curve():
    return memory_curve(NS, d=32, block=64)


def test_peak_memory_follows_allocations_and_frees():
    with PeakMemory() as mem:
        a = torch.empty(1000)  # 4000 bytes
        b = torch.empty(500)  # 2000 bytes
        view = a[:10]  # no new storage
        a.add_(1)  # in place: no new storage
        del a, view
        c = torch.empty(250)  # 1000 bytes, after a was freed
    assert (mem.peak, mem.live) == (6000, 3000)
    del b, c


def test_standard_attention_grows_quadratically_and_tiled_linearly(curve):
    assert 1.8 < growth_exponent(NS, curve["standard_peak"]) < 2.2
    assert 0.9 < growth_exponent(NS, curve["tiled_peak"]) < 1.1
    assert 1.8 < growth_exponent(NS, curve["standard_saved"]) < 2.2
    assert growth_exponent(NS, curve["tiled_saved"]) == pytest.approx(1.0)
    assert curve["tiled_peak"][-1] < curve["standard_peak"][-1] / 4


def test_tiled_saves_exactly_q_k_v_o_and_the_logsumexp():
    n, d = 96, 32
    assert saved_bytes(tiled(32), n, d) == (4 * n * d + n) * 4  # fp32


def test_standard_attention_saves_the_n_by_n_probabilities():
    n, d = 96, 32
    assert saved_bytes(standard_attention, n, d) >= n * n * 4
    assert peak_bytes(standard_attention, n, d) >= 2 * n * n * 4  # S and P at once


@pytest.mark.parametrize("fn", [standard_attention, tiled(32)])
def test_one_pass_measures_what_the_two_separate_passes_do(fn):
    """The book's curve measures both in one pass: the same bytes as apart."""
    n, d = 96, 32
    assert peak_and_saved_bytes(fn, n, d) == (
        peak_bytes(fn, n, d),
        saved_bytes(fn, n, d),
    )


def test_growth_exponent_recovers_the_power_behind_a_fixed_cost():
    ns = [100, 200, 400, 800]
    assert growth_exponent(ns, [7 + 3 * n**2 for n in ns]) == pytest.approx(2.0)
    assert growth_exponent(ns, [5000 + 2 * n for n in ns]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=">= 3"):
        growth_exponent(ns[:2], [1, 2])
    with pytest.raises(ValueError, match="strictly increasing"):
        growth_exponent(ns, [4, 3, 2, 1])


def test_figure_and_table_show_both_algorithms(curve):
    fig = memory_figure(curve)
    assert isinstance(fig, Figure)
    assert len(fig.axes[0].get_lines()) == 2
    table = memory_table(curve)
    assert [row[0] for row in table.rows] == list(NS)
