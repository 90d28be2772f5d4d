"""The book's memory tables and figures, against published numbers and formulas."""

import pytest
from aiinfra.memory.calculator import GiB
from aiinfra.memory.figures import memory_vs_seq_figure, segments_figure
from aiinfra.memory.tables import presets_table, recompute_table, step_rows_table
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
    states, none, _, full, flash, logits = ax.get_lines()
    assert set(states.get_ydata()) == {16 * 8_030_261_248 / GiB}
    seqs = full.get_xdata()
    expected = [32 * 2 * s * 4096 / GiB for s in seqs]  # L = 32 layers, h = 4096
    assert list(full.get_ydata()) == pytest.approx(expected)
    # s b h L / GiB = s / 8192 for Llama 3 8B (2^12 2^5 s / 2^30): its eager
    # layer keeps 41 + 2as/h = 169 sbh at s = 8192, the fused one 34 sbh and
    # 32 MiB of log-sum-exp (hand count in test_cli).
    at_8k = list(seqs).index(8192)
    assert none.get_ydata()[at_8k] == 169
    assert flash.get_ydata()[at_8k] == 34 + 1 / 32
    # fp32 logits: 4 s (h + V) bytes, V = 128,256: linear in s, 3.9 GiB at 8192.
    assert list(logits.get_ydata()) == [4 * s * (4096 + 128256) / GiB for s in seqs]


def test_step_rows_table_puts_16_18_20_psi_and_both_attention_rows():
    table = step_rows_table()
    gib = [row[2] for row in table.rows]
    psi = 8_030_261_248
    assert gib[:3] == [round(k * psi / GiB, 1) for k in (16, 18, 20)]
    # Llama 3 8B's own layer (hand count in test_cli): 41 + 2HT/h = 169 sbh eager,
    # 34 sbh fused (+ 32 MiB of log-sum-exp), s b h L = 2^30.
    assert gib[3:] == [169.0, 34.0, round((4 * 8192 * (4096 + 128256)) / GiB, 1)]
    assert [row[1] for row in table.rows[3:5]] == [
        "L Tbh (41 + 2HT/h)",
        "L (34 Tbh + 4bHT)",
    ]


def test_config_layers_table_is_table_2_for_gpt_and_measured_for_llama():
    from aiinfra.memory.tables import config_layers_table

    rows = {row[0]: row for row in config_layers_table().rows}
    assert rows["gpt3-175b"][3:5] == [34, 32]  # Korthikanti's 34 and fused 32
    # Llama 3 405B by hand: 6 (norm, QKV inputs, Q) + 2 x 2/16 (K, V) + 2 (output
    # projection input) + 4 (MLP norm and fc1 inputs) + SwiGLU at f = 3.25 h:
    # 4 x 6.5 eager, 3 x 6.5 fused.
    assert rows["llama-3-405b"][3:5] == [38.25, 31.75]
    for name in ("llama-3-8b", "mistral-7b", "qwen2.5-72b", "llama-3-405b"):
        assert rows[name][5] == rows[name][6]  # counted = measured


def test_segments_figure_measures_every_k():
    ax = segments_figure(n_layers=4, width=4, b=2).axes[0]
    model, measured = ax.get_lines()[:2]
    assert list(measured.get_xdata()) == [1, 2, 3, 4]
    assert list(measured.get_ydata()) == list(model.get_ydata())  # exact model


def test_zero_memory_vs_ranks_figure_crosses_80_gb_where_the_paper_says():
    # Llama 3 8B, 16 Psi = 128.5 GB: DDP never fits 80 GB; ZeRO-1 (4 Psi + 12 Psi /
    # N) fits from N = 2 (32.1 + 48.2 GB), ZeRO-3 (16 Psi / N) from N = 2 (64.2 GB).
    from aiinfra.memory.figures import zero_memory_vs_ranks_figure

    ax = zero_memory_vs_ranks_figure().axes[0]
    ddp, z1, z2, z3, gpu = ax.get_lines()
    psi = 8_030_261_248
    assert set(ddp.get_ydata()) == {16 * psi / 1e9}
    ranks = list(z3.get_xdata())
    assert list(z3.get_ydata()) == pytest.approx([16 * psi / n / 1e9 for n in ranks])
    assert list(z1.get_ydata()) == pytest.approx(
        [(4 + 12 / n) * psi / 1e9 for n in ranks]
    )
    assert set(gpu.get_ydata()) == {80}
