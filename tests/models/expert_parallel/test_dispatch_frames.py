"""The expert-parallelism page's step-by-step build: permute, dispatch, combine.

Ground truth: the routing itself. With experts placed contiguously (E = 4 on
p = 2 ranks: E0-E1 on rank 0, E2-E3 on rank 1), rank r permutes every assignment
(t, e) of its own tokens, receives in the all-to-all every assignment of any rank
whose expert e has e // 2 == r, and combines the outputs of its own tokens. The
spawned tests of ``test_layer.py`` check that the layer's collectives send exactly
the rows of ``dispatch_plan``.
"""

from aiinfra.book.models import expert_parallel as page
from aiinfra.models.expert_parallel import figures
from matplotlib.text import Text


def boxes(fig) -> dict[str, set[tuple[int, ...]]]:
    found: dict[str, set[tuple[int, ...]]] = {}
    for patch in fig.axes[0].patches:
        kind, *ids = (patch.get_gid() or "none").split(":")
        found.setdefault(kind, set()).add(tuple(int(i) for i in ids))
    return found


def by_hand(steps: int) -> dict[str, set[tuple[int, ...]]]:
    routings = figures.dispatch_routings()
    tokens = routings[0][0].shape[0]
    permute, received, combine = set(), set(), set()
    for r, (experts, kept) in enumerate(routings):
        assert bool(kept.all())  # no capacity limit: every assignment travels
        for t in range(tokens):
            g = r * tokens + t
            combine.add((r, g))
            for e in experts[t].tolist():
                permute.add((r, g, e))
                received.add((e // 2, g, e))
    drawn = {"permute": permute, "received": received, "combine": combine}
    return {k: v for k, v in list(drawn.items())[:steps]}


def test_each_frame_adds_one_step_of_the_routing():
    frames = page.dispatch_frames()
    assert len(frames) == len(figures.DISPATCH_STEPS) == 3
    for steps, fig in enumerate(frames, start=1):
        assert boxes(fig) == by_hand(steps)
        assert fig.get_size_inches()[0] == 10
        assert min(t.get_fontsize() for t in fig.findobj(Text) if t.get_text()) >= 14
    assert boxes(page.dispatch_figure()) == by_hand(3)
