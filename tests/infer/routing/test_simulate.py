"""The routing replay against routes and hits worked out by hand."""

import pytest
from aiinfra.infer.routing.simulate import (
    ROUTERS,
    least_loaded,
    make_router,
    prefix_aware,
    round_robin,
    simulate,
)
from aiinfra.infer.routing.workload import ChatWorkload, RoutedRequest, chat_requests


def _hand_workload() -> list[RoutedRequest]:
    """Five requests on blocks of 2 tokens; the first finishes before the second.

    r0 (1 2 3 4 5) caches blocks [1 2] [3 4]; r1 and r4 share them, r3 too
    (its last block [7 7] holds the last token); r2 (7 8 9) shares nothing.
    """
    hold = (1, 100, 100, 100, 100)
    prompts = ((1, 2, 3, 4, 5), (1, 2, 3, 4, 6), (7, 8, 9), (1, 2, 3, 4, 7, 7))
    prompts += ((1, 2, 3, 4, 8),)
    return [RoutedRequest(p, (), h) for p, h in zip(prompts, hold, strict=True)]


# Worked by hand: loads when each request arrives, then the rule of each router.
# round-robin: i mod 2. least-loaded: r1 sees [0, 0] (r0 done) -> 0, r2 [1, 0] -> 1,
# r3 [1, 1] -> 0, r4 [2, 1] -> 1 (which holds only 7 8 9: no hit).
# prefix-aware (bound 2): r3 and r4 find 4 tokens on replica 0; bound 0 sends r4
# to the less loaded replica 1 instead.
HAND = {
    "round-robin": (round_robin, [0, 1, 0, 1, 0], [0, 0, 0, 4, 4]),
    "least-loaded": (least_loaded, [0, 0, 1, 0, 1], [0, 4, 0, 4, 0]),
    "prefix-aware": (prefix_aware(2), [0, 0, 1, 0, 0], [0, 4, 0, 4, 4]),
    "prefix-aware-0": (prefix_aware(0), [0, 0, 1, 0, 1], [0, 4, 0, 4, 0]),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_routes_and_hits_match_the_hand_worked_workload(name):
    router, routes, cached = HAND[name]
    res = simulate(_hand_workload(), 2, router, block_size=2, num_blocks=16)
    assert res.routes == routes
    assert res.cached == cached


def test_last_block_is_recomputed_for_the_logits():
    reqs = [RoutedRequest((1, 2, 3, 4), (), 1), RoutedRequest((1, 2, 3, 4), (), 1)]
    res = simulate(reqs, 1, round_robin, block_size=2, num_blocks=8)
    assert res.cached == [0, 2]  # block [3 4] holds the last token: computed again


def test_answers_are_cached_for_the_next_turn():
    w = ChatWorkload(
        n_system=1,
        sessions=1,
        turns=2,
        system_len=32,
        user_len=8,
        output_len=16,
        hold=1,
    )
    first, second = chat_requests(w)
    res = simulate([first, second], 1, round_robin, block_size=8, num_blocks=64)
    # The second prompt starts with the first prompt and its answer (56 tokens):
    # 7 full blocks cached, the block of the last token recomputed.
    assert second.tokens[:56] == first.tokens + first.output
    assert res.cached == [0, 56]


@pytest.mark.parametrize("n_replicas", [1, 3, 8])
@pytest.mark.parametrize("name", ROUTERS)
def test_tokens_and_requests_are_conserved(name, n_replicas):
    reqs = chat_requests(ChatWorkload(sessions=8, turns=3, system_len=64))
    res = simulate(reqs, n_replicas, make_router(name), num_blocks=256)
    for req, c, n in zip(reqs, res.cached, res.computed, strict=True):
        assert c + n == len(req.tokens) and 0 <= c < len(req.tokens)
    assert sum(res.per_replica) == len(reqs)
    assert 0 <= res.hit_rate < 1 and res.imbalance >= 1


def test_one_replica_makes_every_router_equal():
    reqs = chat_requests(ChatWorkload(sessions=6, turns=2, system_len=64))
    results = [simulate(reqs, 1, make_router(n), num_blocks=256) for n in ROUTERS]
    assert all(r.cached == results[0].cached for r in results)


def test_chat_workload_shares_system_prompts_and_histories():
    w = ChatWorkload(
        n_system=2, sessions=4, turns=2, system_len=16, user_len=4, output_len=4
    )
    reqs = chat_requests(w)
    assert len(reqs) == 8
    for r in reqs:
        other = next(q for q in reqs if q.session % 2 == r.session % 2)
        assert r.tokens[:16] == other.tokens[:16]
    firsts = {r.session: r for r in reqs[:4]}
    for r in reqs[4:]:
        f = firsts[r.session]
        assert r.tokens[: len(f.tokens) + 4] == f.tokens + f.output


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"n_replicas": 0}, "n_replicas"),
        ({"block_size": 0}, "block_size"),
        ({"num_blocks": 0}, "num_blocks"),
        ({"num_blocks": 2}, "num_blocks"),
    ],
)
def test_bad_input_raises_naming_the_argument(kwargs, name):
    args = {"n_replicas": 2, "block_size": 2, "num_blocks": 16} | kwargs
    with pytest.raises(ValueError, match=name):
        simulate(_hand_workload(), router=round_robin, **args)


def test_bad_router_and_workload_raise():
    with pytest.raises(ValueError, match="requests"):
        simulate([], 2, round_robin)
    with pytest.raises(ValueError, match="router"):
        simulate(_hand_workload(), 2, lambda i, loads, hits: 2, block_size=2)
    with pytest.raises(ValueError, match="load_bound"):
        prefix_aware(-1)
    with pytest.raises(ValueError, match="name"):
        make_router("random")
    with pytest.raises(ValueError, match="sessions"):
        ChatWorkload(sessions=0)
