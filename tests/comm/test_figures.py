"""The chapter's figures: the ring schedule they replay, and each figure's anatomy.

Ground truth for the schedule: the ring all-reduce of Patarasuk & Yuan (2009) as
implemented in :mod:`aiinfra.comm.ring`: after the reduce-scatter rank r holds chunk
r summed over all ranks, and after the all-gather every rank holds every sum.
"""

import io

import pytest
from aiinfra import results
from aiinfra.comm import figures
from matplotlib.figure import Figure


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_ring_schedule_ends_with_every_rank_holding_every_reduced_chunk(p):
    steps = figures.simulate_ring_all_reduce(p)
    assert len(steps) == 1 + 2 * (p - 1)
    everyone = frozenset(range(p))
    assert all(held == everyone for row in steps[-1].held for held in row)


@pytest.mark.parametrize("p", [2, 3, 4, 7])
def test_ring_reduce_scatter_leaves_chunk_r_fully_reduced_on_rank_r(p):
    after_rs = figures.simulate_ring_all_reduce(p)[p - 1]
    assert after_rs.phase == "reduce-scatter" and after_rs.step == p - 1
    for r in range(p):
        assert after_rs.held[r][r] == frozenset(range(p))
        partial = [c for c in range(p) if after_rs.held[r][c] != frozenset(range(p))]
        assert partial == [c for c in range(p) if c != r]


def test_ring_schedule_sends_one_chunk_to_the_right_neighbour_per_step():
    p = 5
    for st in figures.simulate_ring_all_reduce(p)[1:]:
        assert sorted((src, dst) for src, dst, _ in st.sends) == [
            (r, (r + 1) % p) for r in range(p)
        ]
        assert sorted(c for _, _, c in st.sends) == list(range(p))  # all chunks move


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


def test_crossover_figure_has_four_algorithms_and_marked_crossovers():
    fig = figures.crossover_figure(p=16, link="ib400", local_size=8)
    (ax,) = fig.axes
    assert len(ax.lines) == 4
    assert len(ax.collections) == 2  # recursive doubling vs ring, vs Rabenseifner
    assert fig.get_figwidth() == 7
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


def test_ring_schedule_figure_draws_every_buffer_and_send():
    p = 4
    (ax,) = figures.ring_schedule_figure(p).axes
    steps = 1 + 2 * (p - 1)
    assert len(ax.patches) == steps * p * p + 2 * (p - 1) * p  # boxes + send marks


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
