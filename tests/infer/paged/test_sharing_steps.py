"""The paged-attention page's step-by-step build: fork, copy-on-write, a prefix hit.

Ground truth: the allocator's rules applied by hand to the drawn run (blocks of 4
tokens, a pool of 8 handed out lowest id first):

1. A's 6-token prompt takes blocks 0 and 1; block 0 is full and gets its hash.
2. B forks A: both tables are (0, 1), each count 2.
3. A writes its 7th token into the shared, partly full block 1: copy-on-write into
   block 2 (the first free one); A is (0, 2), block 1's count falls to 1.
4. B writes its 7th token: block 1 is its own now, no copy.
5. C's 7-token prompt starts with block 0's 4 tokens: a prefix hit on block 0
   (count 3), and block 3 for the rest.
6. A is freed: blocks 2 and 0 lose a count.
"""

from aiinfra.book.inference import paged_attention as page
from matplotlib.text import Text

HAND = [  # (tables, ref counts of blocks 0-3, copied, hit)
    ({"A": (0, 1)}, (1, 1, 0, 0), None, ()),
    ({"A": (0, 1), "B": (0, 1)}, (2, 2, 0, 0), None, ()),
    ({"A": (0, 2), "B": (0, 1)}, (2, 1, 1, 0), (1, 2), ()),
    ({"A": (0, 2), "B": (0, 1)}, (2, 1, 1, 0), None, ()),
    ({"A": (0, 2), "B": (0, 1), "C": (0, 3)}, (3, 1, 1, 1), None, (0,)),
    ({"B": (0, 1), "C": (0, 3)}, (2, 1, 0, 1), None, ()),
]
TITLES = ["allocate", "fork", "copy-on-write", "write in place", "prefix hit", "free"]


def test_the_drawn_run_equals_the_hand_computation():
    states = page._sharing_states()
    got = [(s.tables, s.ref_counts[:4], s.copied, s.hit) for s in states]
    assert got == HAND
    assert [s.title for s in states] == TITLES
    assert all(s.ref_counts[4:] == (0,) * 4 for s in states)
    assert all(s.hashed == {0} for s in states)  # only A's first block ever fills


def drawn(ax) -> tuple[dict, dict]:
    """(table cells: (name, logical) -> physical, pool: block -> count) of a panel."""
    tables, pool = {}, {}
    for p in ax.patches:
        kind, *rest = (p.get_gid() or "none").split(":")
        if kind == "table":
            tables[(rest[0], int(rest[1]))] = int(rest[2])
        elif kind == "pool":
            pool[int(rest[0])] = int(rest[1])
    return tables, pool


def expected(step: int) -> tuple[dict, dict]:
    tables, counts, _, _ = HAND[step]
    cells = {(n, j): b for n, t in tables.items() for j, b in enumerate(t)}
    return cells, {b: (counts + (0,) * 4)[b] for b in range(8)}


def test_frames_and_book_figure_draw_each_state():
    frames = page.sharing_steps_frames()
    book = page.sharing_steps_figure().axes
    assert len(frames) == len(HAND)
    for step, fig in enumerate(frames):
        assert drawn(fig.axes[0]) == expected(step) == drawn(book[step])
        assert fig.axes[0].get_title() == TITLES[step]
        assert fig.get_size_inches()[0] == 10
        assert min(t.get_fontsize() for t in fig.findobj(Text) if t.get_text()) >= 14
