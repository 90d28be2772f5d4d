"""The step-by-step schedules and their figures, against runs of the implementations.

Ground truths: the step counts of the papers (2(p - 1) for the ring, Patarasuk & Yuan
2009; lg p, 2 lg p and ceil(lg p) for recursive doubling, Rabenseifner and a binomial
tree, Thakur, Rabenseifner & Gropp 2005; three phases for the hierarchical all-reduce,
Mikami et al. 2018) and the implementations of :mod:`aiinfra.comm` themselves. These
run unchanged in p threads of this process over :class:`ThreadedDist`, an in-memory
stand-in for ``torch.distributed`` that logs every message (no process is spawned).
Rank r's input encodes, in every element of chunk c, both c and the set {r}; a sum
of such values still decodes to (c, the set of ranks summed), so each logged message
says which cell it carried and what that cell held.
"""

from __future__ import annotations

import io
import math
import queue
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import matplotlib.colors as mcolors
import pytest
import torch
import torch.distributed as dist
from aiinfra.book.communication import questions
from aiinfra.comm import (
    _validate,
    doubling,
    hierarchical,
    primitives,
    ring,
    steps,
    tree,
)
from aiinfra.comm import schedules as sch
from aiinfra.comm.figures import SUM_COLOR
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.text import Text


class ThreadedDist:
    """Enough of ``torch.distributed`` for p threads, one per rank, to run a collective.

    A group is a tuple of global ranks (``None``: the world). One FIFO queue per
    (src, dst) pair keeps point-to-point order, as gloo does. Each message is logged
    with its Lamport round: one more than the latest round its sender has sent or
    received, the sends of one ``batch_isend_irecv`` sharing a round.
    """

    isend, irecv, ReduceOp = "isend", "irecv", dist.ReduceOp

    def __init__(self, p: int) -> None:
        self.p, self.local, self.lock = p, threading.local(), threading.Lock()
        self.queues = {(a, b): queue.Queue() for a in range(p) for b in range(p)}
        self.log: list[dict] = []  # every message: round, phase, src, dst, cells

    def get_rank(self, group=None) -> int:
        me = self.local.rank
        return me if group is None else (group.index(me) if me in group else -1)

    def get_world_size(self, group=None) -> int:
        return self.p if group is None else len(group)

    def get_backend(self, group=None) -> str:
        return "threads"  # not gloo: the collectives batch their pairs as on NCCL

    def P2POp(self, op, tensor, group=None, group_peer=None):  # noqa: N802 - torch's
        return op, tensor, group_peer if group is None else group[group_peer]

    def batch_isend_irecv(self, ops) -> list:
        round_ = self.local.clock + 1
        for t, peer in [(t, peer) for op, t, peer in ops if op == "isend"]:
            self._send(t, peer, round_)
        for t, peer in [(t, peer) for op, t, peer in ops if op == "irecv"]:
            self._recv(t, peer)
        return []

    def send(self, tensor, group=None, group_dst=None) -> None:
        dst = group_dst if group is None else group[group_dst]
        self._send(tensor, dst, self.local.clock + 1)

    def recv(self, tensor, group=None, group_src=None) -> None:
        self._recv(tensor, group_src if group is None else group[group_src])

    def _send(self, t, dst: int, round_: int) -> None:
        src, self.local.clock = self.local.rank, max(self.local.clock, round_)
        cells = [decode(v, self.p) for v in t.tolist()]
        with self.lock:
            m = {"round": round_, "phase": self.local.phase, "src": src, "dst": dst}
            self.log.append({**m, "cells": cells})
        self.queues[src, dst].put((round_, t.clone()))

    def _recv(self, t, src: int) -> None:
        round_, data = self.queues[src, self.local.rank].get(timeout=20)
        self.local.clock = max(self.local.clock, round_)
        t.copy_(data)

    def run(self, monkeypatch, body) -> None:
        """``body(rank)`` on every rank, each in a thread of its own."""
        for module in (primitives, _validate, ring, doubling, tree):
            monkeypatch.setattr(module, "dist", self)

        def rank_main(r: int) -> None:
            self.local.rank, self.local.clock, self.local.phase = r, 0, 0
            body(r)

        with ThreadPoolExecutor(self.p) as pool:
            for done in [pool.submit(rank_main, r) for r in range(self.p)]:
                done.result(timeout=60)

    def messages(self, **where) -> list[dict]:
        return [m for m in self.log if all(m[k] == v for k, v in where.items())]


def encode(r: int, chunks: int, p: int, per: int = 1) -> torch.Tensor:
    """Rank r's input: ``chunks`` chunks of ``per`` elements 2^r (1 + c 2^p)."""
    values = [(1 << r) * (1 + (c << p)) for c in range(chunks)]
    return torch.tensor(values).repeat_interleave(per)  # (chunks * per,)


def decode(v: int, p: int) -> tuple[int, frozenset[int]]:
    """(chunk, ranks summed) of a sum of :func:`encode` values of one chunk."""
    mask = v % (1 << p)
    chunk = (v - mask) // (mask << p) if mask else -1
    return chunk, frozenset(j for j in range(p) if mask >> j & 1)


def run_all(monkeypatch, p: int, collective, *args, inputs=None):
    """``collective(x_r, *args)`` on p thread ranks; return what each holds, the log."""
    xs = inputs or [encode(r, p, p) for r in range(p)]
    fake = ThreadedDist(p)
    kw = {"check_consistency": False}
    fake.run(monkeypatch, lambda r: collective(xs[r], *args, None, **kw))
    return [[decode(v, p)[1] for v in x.tolist()] for x in xs], fake


def written(before, after) -> set[tuple[int, int]]:
    """The (rank, cell) that a step filled or changed, not those it emptied."""
    cells = [(r, c, h) for r, row in enumerate(after.held) for c, h in enumerate(row)]
    return {(r, c) for r, c, h in cells if h and h != before.held[r][c]}


def assert_replay_matches(sim, fake, contributions: bool = False) -> None:
    """Each step of ``sim`` against the messages of the same round of the real run.

    The step's sends are the round's messages; each message carries what the replay
    says its sender held in that cell before the step; the cells the step wrote are
    those the messages reached. With ``contributions``, cell j of a row is rank j's
    vector summed in (recursive doubling), so a message reaches the cells of its set.
    """
    assert max(m["round"] for m in fake.log) == len(sim) - 1
    for k in range(1, len(sim)):
        msgs = fake.messages(round=k)
        assert sorted((m["src"], m["dst"]) for m in msgs) == sorted(sim[k].sends)
        reached = set()
        for msg, (c, ranks) in [(m, cell) for m in msgs for cell in m["cells"]]:
            row = sim[k - 1].held[msg["src"]]
            if contributions:
                assert {j for j, h in enumerate(row) if h} == ranks
                reached |= {(msg["dst"], j) for j in ranks}
            else:
                assert row[c] == ranks, f"step {k}: rank {msg['src']} cell {c}"
                reached.add((msg["dst"], c))
        assert written(sim[k - 1], sim[k]) == reached, f"step {k}"


@pytest.mark.parametrize("p", [2, 4, 5])
def test_ring_replay_matches_every_message_of_ring_all_reduce(monkeypatch, p):
    held, fake = run_all(monkeypatch, p, ring.ring_all_reduce, "sum")
    sim = sch.simulate_ring_all_reduce(p)
    assert len(sim) == 2 * (p - 1) + 1  # Patarasuk & Yuan: p - 1 steps per phase
    assert_replay_matches(sim, fake)
    assert [list(row) for row in sim[-1].held] == held


@pytest.mark.parametrize("p", [1, 2, 4, 8])
def test_recursive_doubling_replay_matches_the_implementation(monkeypatch, p):
    inputs = [encode(r, 1, p) for r in range(p)]
    all_reduce = doubling.recursive_doubling_all_reduce
    held, fake = run_all(monkeypatch, p, all_reduce, "sum", inputs=inputs)
    sim = sch.simulate_recursive_doubling(p)
    assert len(sim) == int(math.log2(p)) + 1
    if p > 1:
        assert_replay_matches(sim, fake, contributions=True)
    for k, st in enumerate(sim):  # after step k: the block of 2^k ranks around r
        for r, row in enumerate(st.held):
            block = {j for j in range(p) if j >> k == r >> k}
            assert {j for j, h in enumerate(row) if h} == block
    assert held == [[frozenset(range(p))]] * p


@pytest.mark.parametrize("p", [2, 4, 8])
def test_halving_doubling_replay_matches_rabenseifner_all_reduce(monkeypatch, p):
    held, fake = run_all(monkeypatch, p, doubling.rabenseifner_all_reduce, "sum")
    sim, lg = sch.simulate_halving_doubling(p), int(math.log2(p))
    assert len(sim) == 2 * lg + 1
    assert_replay_matches(sim, fake)
    for k in range(1, len(sim)):  # halving gives away what it sends; doubling keeps
        cells = [
            (r, c, h) for r, row in enumerate(sim[k].held) for c, h in enumerate(row)
        ]
        emptied = {(r, c) for r, c, h in cells if not h and sim[k - 1].held[r][c]}
        sent = {(m["src"], c) for m in fake.messages(round=k) for c, _ in m["cells"]}
        assert emptied == (sent if k <= lg else set())
        width = sum(bool(h) for h in sim[k].held[0])  # the window: p/2^k, then grows
        assert width == (p >> k if k <= lg else 1 << (k - lg))
    assert [list(row) for row in sim[-1].held] == held


@pytest.mark.parametrize(("p", "root"), [(2, 1), (4, 0), (8, 0), (8, 3)])
def test_broadcast_replay_matches_binomial_broadcast_round_by_round(
    monkeypatch, p, root
):
    data = [encode(root, 1, p) * (r == root) for r in range(p)]  # zeros but the root
    held, fake = run_all(monkeypatch, p, tree.binomial_broadcast, root, inputs=data)
    sim = sch.simulate_binomial_broadcast(p, root)
    assert len(sim) == math.ceil(math.log2(p)) + 1
    arrived = {m["dst"]: m["round"] for m in fake.log}  # Lamport rounds of the run
    for k, st in enumerate(sim):
        sent = [(m["src"], m["dst"]) for m in fake.messages(round=k)]
        assert sorted(st.sends) == sorted(sent)
        holders = {r for r, (h,) in enumerate(st.held) if h == frozenset({root})}
        assert holders == {root} | {r for r, t in arrived.items() if t <= k}
        assert all(h in (frozenset(), frozenset({root})) for (h,) in st.held)
    assert held == [[frozenset({root})]] * p


@pytest.mark.parametrize("p", [3, 5, 6, 7, 12])
def test_broadcast_replay_sends_binomial_broadcasts_messages_in_order(monkeypatch, p):
    # For p not a power of two the replay's rounds (by distance) may put a send later
    # than the code could: compare the messages and each sender's order instead.
    data = [encode(0, 1, p) * (r == 0) for r in range(p)]
    held, fake = run_all(monkeypatch, p, tree.binomial_broadcast, 0, inputs=data)
    sim = sch.simulate_binomial_broadcast(p)
    replayed = [s for st in sim for s in st.sends]
    for src in range(p):
        real = [m["dst"] for m in fake.messages(src=src)]
        assert [d for s, d in replayed if s == src] == real
    assert len(sim) == math.ceil(math.log2(p)) + 1
    assert held == [list(row) for row in sim[-1].held] == [[frozenset({0})]] * p


@pytest.mark.parametrize(("num_nodes", "L"), [(2, 4), (4, 2), (2, 1), (1, 3)])
def test_hierarchical_replay_matches_each_phase_of_the_implementation(
    monkeypatch, num_nodes, L
):
    p = num_nodes * L
    xs, fake = [encode(r, L, p, per=num_nodes) for r in range(p)], ThreadedDist(p)
    seen: dict[tuple[int, int], set] = {}  # (rank, phase) -> the cells it holds after

    def phase(k: int, name: str, shows) -> None:  # wrap the ring function of phase k
        fn = getattr(ring, name)

        def run(*args, **kwargs):
            fake.local.phase = k
            out = fn(*args, **kwargs)
            seen[fake.local.rank, k] = {decode(v, p) for v in shows(args, out).tolist()}
            return out

        monkeypatch.setattr(hierarchical, name, run)

    phase(1, "ring_reduce_scatter_chunks", lambda args, out: out)
    phase(2, "ring_all_reduce", lambda args, out: args[0])
    phase(3, "ring_all_gather_chunks", lambda args, out: torch.cat(args[0]))

    def body(r: int) -> None:
        node, local = divmod(r, L)
        intra, inter = tuple(range(node * L, node * L + L)), tuple(range(local, p, L))
        h = hierarchical.Hierarchy(L, num_nodes, local, node, intra, inter)
        hierarchical.hierarchical_all_reduce(xs[r], h, "sum", check_consistency=False)

    fake.run(monkeypatch, body)
    sim = sch.simulate_hierarchical_all_reduce(num_nodes, L)
    assert [st.step for st in sim] == [0, 1, 1, 1]  # Mikami et al.: three phases
    for k in (1, 2, 3):
        sent = {(m["src"], m["dst"]) for m in fake.messages(phase=k)}
        assert set(sim[k].sends) == sent
        for r in range(p):  # shard l (phases 1 and 2), all L shards (phase 3)
            assert {(c, h) for c, h in enumerate(sim[k].held[r]) if h} == seen[r, k]
    everyone = frozenset(range(p))
    for r in range(p):
        node = frozenset(range(r - r % L, r - r % L + L))
        assert seen[r, 1] == {(r % L, node)}  # shard l of the node's sum
        assert seen[r, 2] == {(r % L, everyone)}
    assert [list(row) for row in sim[-1].held] == [[everyone] * L] * p


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_ring_replay_ends_with_every_rank_holding_every_reduced_chunk(p):
    sim = sch.simulate_ring_all_reduce(p)
    assert len(sim) == 1 + 2 * (p - 1)
    assert all(h == frozenset(range(p)) for row in sim[-1].held for h in row)


@pytest.mark.parametrize("p", [2, 3, 4, 7])
def test_ring_reduce_scatter_leaves_chunk_r_fully_reduced_on_rank_r(p):
    after_rs = sch.simulate_ring_all_reduce(p)[p - 1]
    assert after_rs.phase == "reduce-scatter" and after_rs.step == p - 1
    everyone = frozenset(range(p))
    full = [[c for c, h in enumerate(row) if h == everyone] for row in after_rs.held]
    assert full == [[r] for r in range(p)]


def test_ring_replay_sends_one_chunk_to_the_right_neighbour_per_step():
    p, sim = 5, sch.simulate_ring_all_reduce(5)
    for before, st in zip(sim, sim[1:], strict=False):
        assert sorted(st.sends) == [(r, (r + 1) % p) for r in range(p)]
        assert sorted(r for r, _ in written(before, st)) == list(range(p))


# Each book schedule: its frames, its replay, and the number of steps of the paper.
FRAMES = {
    "ring": (steps.ring_schedule_frames, sch.simulate_ring_all_reduce, 4, 2 * 3),
    "doubling": (
        steps.recursive_doubling_frames,
        sch.simulate_recursive_doubling,
        8,
        3,
    ),
    "halving": (steps.halving_doubling_frames, sch.simulate_halving_doubling, 8, 2 * 3),
    "tree": (steps.binomial_broadcast_frames, sch.simulate_binomial_broadcast, 8, 3),
    "hierarchical": (
        lambda _: steps.hierarchical_frames(2, 4),
        lambda _: sch.simulate_hierarchical_all_reduce(2, 4),
        None,
        3,
    ),
}


def _texts(fig):
    return fig.findobj(lambda a: isinstance(a, Text) and a.get_text())


def _words_or_numbers(text: str) -> bool:
    """A figure's text is words (translated) or numbers (kept), never both."""
    return not (re.search(r"\d", text) and re.search(r"[A-Za-z]{3,}", text))


@pytest.mark.parametrize("name", FRAMES)
def test_each_frame_draws_the_state_of_its_step(name):
    frames_of, replay, p, count = FRAMES[name]
    frames, sim = frames_of(p), replay(p)
    assert len(frames) == len(sim) == count + 1  # the start, then one per step
    white, full = mcolors.to_rgba("white"), mcolors.to_rgba(SUM_COLOR)
    for k, (fig, st) in enumerate(zip(frames, sim, strict=True)):
        assert tuple(fig.get_size_inches()) == (10, 5)
        (ax,) = fig.axes
        boxes = [b for b in ax.patches if isinstance(b, Rectangle) and b.get_fill()]
        edges = [b for b in ax.patches if isinstance(b, Rectangle) and not b.get_fill()]
        cells = [h for row in st.held for h in row]
        everyone = frozenset(range(len(st.held)))
        assert len(boxes) == len(cells)
        assert sum(b.get_facecolor() == full for b in boxes) == cells.count(everyone)
        assert sum(b.get_facecolor() == white for b in boxes) == cells.count(
            frozenset()
        )
        assert len(edges) == (len(written(sim[k - 1], st)) if k else 0)
        arrows = sum(isinstance(a, FancyArrowPatch) for a in ax.patches)
        assert arrows == len({frozenset(s) for s in st.sends})  # one per pair
        for text in _texts(fig):
            assert text.get_fontsize() >= 14, text.get_text()
            assert _words_or_numbers(text.get_text()), text.get_text()
    frames[-1].savefig(io.BytesIO(), format="png", dpi=64)


@pytest.mark.parametrize(
    "name", ["ring_schedule", "recursive_doubling", "hierarchical"]
)
def test_book_figures_are_a_column_wide_with_book_fonts(name):
    fig = getattr(steps, f"{name}_figure")()
    assert fig.get_figwidth() == 7
    for text in _texts(fig):
        assert 8 <= text.get_fontsize() <= 10, text.get_text()
        assert _words_or_numbers(text.get_text()), text.get_text()
    fig.savefig(io.BytesIO(), format="png", dpi=64)


@pytest.mark.parametrize(
    ("fn", "args", "message"),
    [
        (sch.simulate_ring_all_reduce, (0,), "p must be an int >= 1"),
        (sch.simulate_ring_all_reduce, (True,), "p must be an int"),
        (sch.simulate_recursive_doubling, (6,), "p must be a power of two"),
        (sch.simulate_halving_doubling, (12,), "p must be a power of two"),
        (sch.simulate_halving_doubling, (0,), "p must be a power of two >= 1, got 0"),
        (
            sch.simulate_binomial_broadcast,
            (8, 8),
            r"root must be an int in \[0, 7\], got 8",
        ),
        (sch.simulate_binomial_broadcast, (0,), "p must be an int >= 1"),
        (sch.simulate_hierarchical_all_reduce, (0, 4), "num_nodes must be"),
        (sch.simulate_hierarchical_all_reduce, (2, 2.0), "local_size must be"),
        (steps.schedule_figure, ([], "chunks"), "steps must hold"),
        (steps.schedule_frames, ([], "chunks"), "steps must hold"),
    ],
)
def test_bad_arguments_raise_a_value_error_naming_them(fn, args, message):
    with pytest.raises(ValueError, match=message):
        fn(*args)


def test_a_grid_needs_at_least_one_column():
    with pytest.raises(ValueError, match="cols must be an int >= 1"):
        steps.schedule_figure(sch.simulate_ring_all_reduce(2), "chunks", cols=0)


def test_question_answers_match_the_closed_forms():
    # Step counts: 2(p - 1), lg p and 2 lg p at p = 8 (Thakur et al. 2005). A binomial
    # parent is v minus its lowest set bit, 5 - 1 = 4, and a bit worth 2^i fills in
    # round ceil(lg 8) - i = 3. Bytes per rank: 2 (N - 1)/N n/L with N = 2, L = 4
    # across nodes, 2 (p - 1)/p n for a flat ring, n = 64 MiB.
    assert questions.ring_steps_8_ranks() == 14
    assert questions.recursive_doubling_steps_8_ranks() == 3
    assert questions.rabenseifner_steps_8_ranks() == 6
    assert questions.broadcast_parent_of_rank_5() == 4
    assert questions.broadcast_round_of_rank_5() == 3
    assert questions.hierarchical_inter_node_mib() == pytest.approx(16)
    assert questions.flat_ring_mib() == pytest.approx(112)
