"""NHR's step figures and frames draw the replay of the schedule the code runs."""

import io

import matplotlib.colors as mcolors
import pytest
from aiinfra.comm.figures import SUM_COLOR
from aiinfra.comm.hccl import figures
from aiinfra.comm.hccl.schedules import (
    all_gather_steps,
    reduce_scatter_steps,
    replay_all_reduce,
)
from matplotlib.patches import Rectangle


@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_replay_follows_the_step_lists_and_ends_all_summed(p):
    sim = replay_all_reduce("nhr", p)
    k = (p - 1).bit_length()
    assert len(sim) == 2 * k + 1  # the start, ceil(lg p) steps per phase
    plans = [
        reduce_scatter_steps("nhr", r, p) + all_gather_steps("nhr", r, p)
        for r in range(p)
    ]
    for s, st in enumerate(sim[1:]):
        assert sorted(st.sends) == sorted((r, plans[r][s].dst) for r in range(p))
    everyone = frozenset(range(p))
    assert all(h == everyone for row in sim[-1].held for h in row)
    after_rs = sim[k]  # after the reduce-scatter, rank r's slice r is complete
    assert [row[r] for r, row in enumerate(after_rs.held)] == [everyone] * p


def test_each_frame_draws_its_step():
    frames, sim = figures.nhr_schedule_frames(5), replay_all_reduce("nhr", 5)
    assert len(frames) == len(sim) == 7
    full = mcolors.to_rgba(SUM_COLOR)
    for fig, st in zip(frames, sim, strict=True):
        assert tuple(fig.get_size_inches()) == (10, 5)
        (ax,) = fig.axes
        boxes = [b for b in ax.patches if isinstance(b, Rectangle) and b.get_fill()]
        cells = [h for row in st.held for h in row]
        assert len(boxes) == len(cells) == 25
        assert sum(b.get_facecolor() == full for b in boxes) == cells.count(
            frozenset(range(5))
        )
    frames[-1].savefig(io.BytesIO(), format="png", dpi=48)


def test_crossover_figure_marks_ring_against_folded_hdr():
    fig = figures.crossover_figure(p=6, link="ib400")
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.get_lines()] == ["ring", "H-D_R", "NHR"]
    assert len(ax.collections) == 1  # one crossing: ring and H-D_R
