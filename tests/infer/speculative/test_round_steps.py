"""The speculative page's step-by-step build: one round of ``verify`` with a rejection.

Ground truth: the acceptance rule of Leviathan et al. (2023), Sec. 2.3, applied by
hand to the toy laws p = (0.4, 0.3, 0.1, 0.1, 0.1), q = (0.1, 0.2, 0.3, 0.2, 0.2):
a draft x is kept iff u < p(x) / q(x) for its coin u, and the first rejected one
is replaced by a token of the residual norm(max(0, p - q)) = (0.75, 0.25, 0, 0, 0),
so by token 0 or 1. The drawn round drafts tokens 1, 3 and 2: token 1 has
p / q = 1.5 and is kept whatever its coin; token 3 (p / q = 1/2) and token 2
(p / q = 1/3) are decided by their coins.
"""

import pytest
from aiinfra.book.inference import speculative as page
from matplotlib.text import Text

P = (0.4, 0.3, 0.1, 0.1, 0.1)
Q = (0.1, 0.2, 0.3, 0.2, 0.2)


def test_the_round_follows_the_rule_by_hand():
    r = page._spec_round()
    assert r.drafts == (1, 3, 2)
    kept = 0
    for x, u in zip(r.drafts, r.coins, strict=True):
        if not u < P[x] / Q[x]:
            break
        kept += 1
    assert r.accepted == kept == page.spec_round_kept() == 2  # a rejection at the 3rd
    assert r.tokens[:kept] == r.drafts[:kept]
    assert len(r.tokens) == kept + 1 and r.tokens[-1] in (0, 1)  # residual's support


def gids(fig, kind: str) -> dict[int, str]:
    found = {}
    for artist in fig.findobj(lambda a: (a.get_gid() or "").startswith(kind + ":")):
        _, i, value = artist.get_gid().split(":")
        found[int(i)] = value
    return found


def test_frames_draw_the_verifiers_decisions_position_by_position():
    r = page._spec_round()
    frames = page.spec_round_frames()
    assert len(frames) == page.SPEC_K
    for shown, fig in enumerate(frames, start=1):
        verdicts = {i: str(int(i < r.accepted)) for i in range(shown)}
        assert gids(fig, "verdict") == verdicts
        coins = {i: float(v) for i, v in gids(fig, "coin").items()}
        assert coins == pytest.approx(
            {i: r.coins[i] * Q[r.drafts[i]] for i in range(shown)}, abs=1e-6
        )
        assert gids(fig, "replacement") == ({2: str(r.tokens[2])} if shown == 3 else {})
        assert fig.get_size_inches()[0] == 10
        assert min(t.get_fontsize() for t in fig.findobj(Text) if t.get_text()) >= 14
    book = page.spec_round_figure()
    assert gids(book, "verdict") == gids(frames[-1], "verdict")
