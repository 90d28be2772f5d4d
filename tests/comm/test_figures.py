"""The chapter's figures: the collectives' semantics, and each figure's anatomy.

The step-by-step schedules (the ring's among them) are tested in ``test_steps``.
"""

import io

import pytest
from aiinfra import results
from aiinfra.comm import figures
from matplotlib.figure import Figure


def test_collective_semantics_follow_their_definitions():
    p, full = 4, frozenset(range(4))
    _, after = figures.collective_semantics("all_reduce", p)
    assert all(cell == (full, c) for row in after for c, cell in enumerate(row))
    _, after = figures.collective_semantics("reduce_scatter", p)
    assert after == [[(full, r)] for r in range(p)]
    before, after = figures.collective_semantics("all_to_all", p)
    assert all(after[i][j] == before[j][i] for i in range(p) for j in range(p))
    before, after = figures.collective_semantics("broadcast", p)
    assert before[1] == [None] * p and after[3] == before[0]
    with pytest.raises(ValueError, match="collective must be one of"):
        figures.collective_semantics("allreduce", p)


def _render(fig: Figure) -> None:
    fig.savefig(io.BytesIO(), format="png", dpi=100)  # 7 in at 100 dpi: 700 px


def test_crossover_figure_has_six_algorithms_and_marked_crossovers():
    fig = figures.crossover_figure(p=16, link="ib400", local_size=8)
    (ax,) = fig.axes
    labels = [line.get_label() for line in ax.lines]
    assert "double binary tree" in labels and len(labels) == 6
    assert len(ax.collections) == 2  # recursive doubling vs ring, vs Rabenseifner
    assert fig.get_figwidth() == 7
    _render(fig)


def test_hierarchy_figure_has_one_line_per_variant():
    fig = figures.hierarchy_figure(nodes=4, local_size=8, rails=8)
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines] == [
        "ring, one NIC per node",
        "ring, one rail per NIC",
        "hierarchical, all NICs",
    ]
    _render(fig)


def test_double_tree_figure_darkens_each_rank_in_one_tree_only():
    fig = figures.double_tree_figure(p=8)
    assert len(fig.axes) == 2
    dark = [
        {int(t.get_text()) for t in ax.texts if t.get_color() == "white"}
        for ax in fig.axes
    ]
    assert dark[0] == {0, 2, 4, 6} and dark[1] == {1, 3, 5, 7}
    _render(fig)


def test_scaling_figure_has_a_panel_per_size():
    fig = figures.scaling_figure(sizes=(4096, 2**26))
    assert len(fig.axes) == 2 and all(len(ax.lines) == 3 for ax in fig.axes)
    _render(fig)


def test_collectives_figure_has_a_panel_per_collective():
    fig = figures.collectives_figure(p=4)
    assert [ax.get_title() for ax in fig.axes] == [
        "broadcast",
        "reduce",
        "all-reduce",
        "reduce-scatter",
        "all-gather",
        "all-to-all",
    ]
    _render(fig)


def test_results_figure_has_a_panel_per_collective(tmp_path, monkeypatch):
    rows = [
        {"collective": c, "algorithm": a, "size": s, "busbw": 1.0}
        for c in ("all_reduce", "broadcast")
        for a in ("ours", "torch")
        for s in (1024, 2048)
    ]
    monkeypatch.setenv(results.DATA_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="aiinfra bench collectives"):
        figures.results_figure()
    results.write("collectives", {"rows": rows}, backend="gloo", world_size=2)
    fig = figures.results_figure()
    assert len(fig.axes) == 2 and all(len(ax.lines) == 2 for ax in fig.axes)
    assert [ax.get_title() for ax in fig.axes] == ["all-reduce", "broadcast"]
    _render(fig)
