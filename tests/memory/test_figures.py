"""The book's memory tables and figures, against published numbers and formulas."""

import pytest
from aiinfra.memory.calculator import GiB
from aiinfra.memory.figures import memory_vs_seq_figure, segments_figure
from aiinfra.memory.tables import presets_table, recompute_table
from aiinfra.models.presets import DENSE_PRESETS


def test_presets_table_lists_the_dense_presets_with_16_psi():
    table = presets_table()
    assert [r[0] for r in table.rows] == list(DENSE_PRESETS)
    llama = table.rows[0]  # Llama 3 8B: 8,030,261,248 parameters (published)
    assert llama[1:7] == [4096, 32, 32, 8, 14336, 128256]
    assert llama[8] == round(16 * 8_030_261_248 / GiB, 1)  # ZeRO: 16 Psi bytes


def test_recompute_table_is_korthikanti_table_2_for_gpt3():
    s, b, h, a, t = 2048, 1, 12288, 96, 8  # GPT-3 175B (Brown et al., Table 2.1)
    per_layer = [r[1] for r in recompute_table().rows]
    assert per_layer == sorted(per_layer, reverse=True)  # each row saves more
    assert per_layer[0] == s * b * h * (34 + 5 * a * s / h)
    assert per_layer[3] == s * b * h * (10 + 24 / t)  # TP + selective
    assert per_layer[-1] == 2 * s * b * h  # full recompute: 2sbh


def test_memory_vs_seq_figure_plots_16_psi_and_2sbh_per_layer():
    ax = memory_vs_seq_figure("llama-3-8b").axes[0]
    states, _, _, full = ax.get_lines()
    assert set(states.get_ydata()) == {16 * 8_030_261_248 / GiB}
    seqs = full.get_xdata()
    expected = [32 * 2 * s * 4096 / GiB for s in seqs]  # L = 32 layers, h = 4096
    assert list(full.get_ydata()) == pytest.approx(expected)


def test_segments_figure_measures_every_k():
    ax = segments_figure(n_layers=4, width=4, b=2).axes[0]
    model, measured = ax.get_lines()[:2]
    assert list(measured.get_xdata()) == [1, 2, 3, 4]
    assert list(measured.get_ydata()) == list(model.get_ydata())  # exact model
