"""The schedules of the chapter's collectives, replayed step by step on sets of ranks.

A replay runs an algorithm on sets instead of numbers: a buffer cell holds the set of
ranks whose data it sums, so each step's state says exactly which rank holds what,
and the steps list who sent to whom. The replays use the partner and offset formulas
of the implementations: the ring all-reduce step by step (Patarasuk & Yuan 2009),
recursive doubling and Rabenseifner's halving-doubling round by round (Thakur,
Rabenseifner & Gropp 2005), the binomial-tree broadcast round by round and the
hierarchical all-reduce phase by phase (Mikami et al. 2018). The tests check each
against a run of the implementation itself; :mod:`aiinfra.comm.steps` draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiinfra import checks

Held = tuple[tuple[frozenset[int], ...], ...]  # held[r][c]: ranks summed in the cell


@dataclass(frozen=True)
class Step:
    """One step of a schedule: who sent to whom, and what every rank holds after it.

    Args:
        phase: what the step does, in words (``"reduce-scatter"``); ``"start"`` first.
        step: 1-based index of the step within its phase; 0 for the start.
        sends: ``(src, dst)`` of each message of the step.
        held: ``held[r][c]``, the ranks whose data rank r's cell c sums; empty where
            rank r holds nothing it will use.
    """

    phase: str
    step: int
    sends: tuple[tuple[int, int], ...]
    held: Held


def _freeze(held: list[list[frozenset[int]]]) -> Held:
    return tuple(map(tuple, held))


def simulate_ring_all_reduce(p: int) -> list[Step]:
    """Replay :func:`~aiinfra.comm.ring.ring_all_reduce` on p ranks of p chunks each.

    In reduce-scatter step s (0-based) rank r sends its partial sum of chunk
    (r - 1 - s) mod p to rank r + 1, which adds its own part; after p - 1 steps rank
    r holds the full sum of chunk r. In all-gather step s rank r forwards chunk
    (r - s) mod p, which the receiver copies. All sends of a step happen at once.

    Returns:
        The start and the 2(p - 1) steps, in order.

    Raises:
        ValueError: ``p`` is not an int >= 1.
    """
    checks.positive_int("p", p)
    held = [[frozenset({r}) for _ in range(p)] for r in range(p)]
    steps = [Step("start", 0, (), _freeze(held))]
    for phase, offset in (("reduce-scatter", -1), ("all-gather", 0)):
        for s in range(p - 1):
            moves = [(r, (r + 1) % p, (r + offset - s) % p) for r in range(p)]
            payload = [held[src][c] for src, _, c in moves]  # sent before received
            for (_, dst, c), data in zip(moves, payload, strict=True):
                if phase == "reduce-scatter":
                    assert not held[dst][c] & data, "a contribution summed twice"
                    held[dst][c] = held[dst][c] | data
                else:
                    held[dst][c] = data
            sends = tuple((src, dst) for src, dst, _ in moves)
            steps.append(Step(phase, s + 1, sends, _freeze(held)))
    return steps


def simulate_recursive_doubling(p: int) -> list[Step]:
    """Replay :func:`~aiinfra.comm.recursive_doubling_all_reduce` on p ranks.

    At step k rank r swaps its whole vector with rank r XOR 2^k and both sum. Cell j
    of rank r holds {j} once rank j's vector is summed into rank r's.

    Returns:
        The start and the lg p steps, in order.

    Raises:
        ValueError: ``p`` is not a power of two (the fold is not drawn).
    """
    checks.power_of_two("p", p)
    have = [frozenset({r}) for r in range(p)]
    held = [[frozenset({j}) & have[r] for j in range(p)] for r in range(p)]
    steps = [Step("start", 0, (), _freeze(held))]
    mask = 1
    while mask < p:  # distance 1, 2, 4, ...
        have = [have[r] | have[r ^ mask] for r in range(p)]
        held = [[frozenset({j}) & have[r] for j in range(p)] for r in range(p)]
        sends = tuple((r, r ^ mask) for r in range(p))
        steps.append(Step("recursive doubling", len(steps), sends, _freeze(held)))
        mask <<= 1
    return steps


def simulate_halving_doubling(p: int) -> list[Step]:
    """Replay :func:`~aiinfra.comm.rabenseifner_all_reduce` on p ranks of p chunks.

    Reduce-scatter by recursive halving: at distance p/2, p/4, ..., 1, rank r keeps
    the half of its window on its side of the partner r XOR distance (the upper half
    if that bit of r is set), adds the partner's part of it, and gives the other half
    away (its cells empty). All-gather by recursive doubling: at distance 1, 2, ...,
    p/2 the partners swap whole windows.

    Returns:
        The start and the 2 lg p steps, in order.

    Raises:
        ValueError: ``p`` is not a power of two (the fold is not drawn).
    """
    checks.power_of_two("p", p)
    held = [[frozenset({r})] * p for r in range(p)]
    window = [(0, p)] * p  # rank r is responsible for chunks [lo, hi)
    steps = [Step("start", 0, (), _freeze(held))]
    mask = p // 2
    while mask >= 1:  # halving: distance p/2, p/4, ..., 1
        before = [list(row) for row in held]
        for r, (lo, hi) in enumerate(window):
            mid, peer = (lo + hi) // 2, r ^ mask
            lo, hi = (mid, hi) if r & mask else (lo, mid)  # keep; give the other half
            window[r] = (lo, hi)
            mine, theirs = before[r][lo:hi], before[peer][lo:hi]
            held[r] = [frozenset()] * p
            held[r][lo:hi] = [a | b for a, b in zip(mine, theirs, strict=True)]
        sends = tuple((r, r ^ mask) for r in range(p))
        steps.append(Step("reduce-scatter", len(steps), sends, _freeze(held)))
        mask //= 2
    mask = 1
    while mask < p:  # doubling: distance 1, 2, ..., p/2; the windows arrive whole
        before, old = [list(row) for row in held], list(window)
        for r in range(p):
            (lo, hi), (plo, phi) = old[r], old[r ^ mask]
            held[r][plo:phi] = before[r ^ mask][plo:phi]
            window[r] = (min(lo, plo), max(hi, phi))
        sends = tuple((r, r ^ mask) for r in range(p))
        steps.append(Step("all-gather", mask.bit_length(), sends, _freeze(held)))
        mask <<= 1
    return steps


def simulate_binomial_broadcast(p: int, root: int = 0) -> list[Step]:
    """Replay :func:`~aiinfra.comm.binomial_broadcast` from ``root`` on p ranks.

    With v = (r - root) mod p, the root first sends to v = 2^(ceil(lg p) - 1); in
    each later round every holder sends half as far, to v + distance if that is a
    rank. Cell 0 of rank r holds {root} once the data has reached it.

    Returns:
        The start and the ceil(lg p) rounds, in order.

    Raises:
        ValueError: ``p`` < 1, or ``root`` outside [0, p).
    """
    checks.positive_int("p", p)
    checks.int_in("root", root, 0, p - 1)
    has = {root}

    def state() -> Held:
        return tuple(
            (frozenset({root}) if r in has else frozenset(),) for r in range(p)
        )

    steps = [Step("start", 0, (), state())]
    rounds = (p - 1).bit_length()  # ceil(lg p)
    for k in range(rounds):
        d = 1 << (rounds - 1 - k)  # the distance of this round: p/2, p/4, ..., 1
        sends = tuple((r, (r + d) % p) for r in sorted(has) if (r - root) % p + d < p)
        assert not has & {dst for _, dst in sends}, "a rank receives twice"
        has |= {dst for _, dst in sends}
        steps.append(Step("broadcast", k + 1, sends, state()))
    return steps


def _ring(members: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The sends of a ring over ``members``: each to the next, the last to the first."""
    m = len(members)
    return tuple((a, members[(i + 1) % m]) for i, a in enumerate(members) if m > 1)


def simulate_hierarchical_all_reduce(num_nodes: int, local_size: int) -> list[Step]:
    """Replay :func:`~aiinfra.comm.hierarchical_all_reduce` phase by phase.

    Ranks [0, p_node) are node 0, [p_node, 2 p_node) node 1, ...; each buffer is
    p_node shards (p_node = ``local_size``). (1) A ring
    reduce-scatter inside each node leaves local rank j with shard j of the node's
    sum; (2) the ranks with local rank j, one per node, all-reduce it in a ring; (3)
    a ring all-gather inside each node hands every rank all p_node shards.

    Returns:
        The start and the three phases, in order.

    Raises:
        ValueError: ``num_nodes`` or ``local_size`` is not an int >= 1.
    """
    checks.positive_int("num_nodes", num_nodes)
    checks.positive_int("local_size", local_size)
    L, p = local_size, num_nodes * local_size
    nodes = [list(range(n * L, (n + 1) * L)) for n in range(num_nodes)]  # intra groups
    peers = [list(range(i, p, L)) for i in range(L)]  # inter groups, one per local rank
    held = [[frozenset({r})] * L for r in range(p)]
    steps = [Step("start", 0, (), _freeze(held))]

    def shard_sums(groups: list[list[int]]) -> list[list[frozenset[int]]]:
        """Shard r mod p_node of each rank, summed over its group; others empty."""
        out = [[frozenset()] * L for _ in range(p)]
        for group in groups:
            for r in group:
                out[r][r % L] = frozenset().union(*(held[m][r % L] for m in group))
        return out

    held = shard_sums(nodes)
    sends = tuple(s for node in nodes for s in _ring(node))
    steps.append(Step("reduce-scatter inside nodes", 1, sends, _freeze(held)))
    held = shard_sums(peers)
    sends = tuple(s for group in peers for s in _ring(group))
    steps.append(Step("all-reduce across nodes", 1, sends, _freeze(held)))
    held = [[held[r - r % L + c][c] for c in range(L)] for r in range(p)]
    sends = tuple(s for node in nodes for s in _ring(node))
    steps.append(Step("all-gather inside nodes", 1, sends, _freeze(held)))
    return steps
