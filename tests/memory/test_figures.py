"""The book's memory tables and figures build, and agree with the calculator."""

from aiinfra.memory.calculator import GiB
from aiinfra.memory.figures import (
    memory_vs_seq_figure,
    presets_table,
    recompute_table,
    segments_figure,
)
from aiinfra.memory.presets import PRESETS
from matplotlib.figure import Figure


def test_presets_table_lists_every_preset():
    assert [r[0] for r in presets_table().rows] == list(PRESETS)


def test_recompute_table_orders_configurations_by_memory():
    table = recompute_table()
    per_layer = [r[1] for r in table.rows]
    assert per_layer == sorted(per_layer, reverse=True)  # each row saves more
    assert per_layer[-1] == 2 * 2048 * 12288  # full recompute: 2sbh
    assert "GiB" in table.columns[2] and "2^30" in table.note
    assert table.rows[0][2] == round(96 * per_layer[0] / GiB, 1)


def test_figures_are_matplotlib_figures():
    assert isinstance(memory_vs_seq_figure(), Figure)
    assert isinstance(segments_figure(n_layers=4, width=4, b=2), Figure)
