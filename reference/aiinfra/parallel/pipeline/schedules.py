"""Pipeline schedules as data: which rank runs which pass of which micro-batch, when.

A pipeline cuts the model into stages, one group of consecutive layers per rank,
and cuts the batch into m micro-batches so that the stages work on different
micro-batches at once. A schedule is nothing but the order in which each rank runs
its passes: F (forward), B (backward; for the input gradient only when the schedule
splits it) and W (the weight gradient, split from B by zero-bubble schedules). This
module writes four published schedules as lists of :class:`Action`: GPipe (Huang et
al. 2019), 1F1B (PipeDream-Flush, as in Narayanan et al. 2021, Sec. 2.2.1), the
interleaved 1F1B of Megatron-LM (Narayanan et al. 2021, Sec. 2.2.2) and ZB-H1 (Qi et
al. 2024, Sec. 2.1). Times come later, from :mod:`~aiinfra.parallel.pipeline.simulator`.
Notation: p ranks (pipeline stages), m micro-batches per step, v chunks per rank;
rank r holds the v stages r, r + p, ..., r + (v - 1) p of the p v stages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiinfra import checks

KINDS = ("F", "B", "W")


@dataclass(frozen=True)
class Action:
    """One pass of one micro-batch through one chunk of a rank's layers.

    Attributes:
        rank: the rank that runs it, ``0 <= rank < p``.
        slot: its position in the rank's order (0, 1, ...): a rank runs its actions
            one at a time in slot order, each once its inputs have arrived.
        microbatch: ``0 <= microbatch < m``.
        chunk: ``0 <= chunk < v``; the action's stage is ``chunk * p + rank``.
        kind: ``"F"``, ``"B"`` or ``"W"``.
    """

    rank: int
    slot: int
    microbatch: int
    chunk: int
    kind: str


@dataclass(frozen=True)
class Schedule:
    """A named schedule for p ranks, m micro-batches and v chunks per rank.

    Attributes:
        name: ``"GPipe"``, ``"1F1B"``, ``"interleaved 1F1B"`` or ``"ZB-H1"``.
        p: ranks, the pipeline stages of one chunk each.
        m: micro-batches per step.
        v: chunks (stages) per rank.
        actions: every action, rank by rank, each rank's in slot order.
    """

    name: str
    p: int
    m: int
    v: int
    actions: tuple[Action, ...]

    @property
    def n_stages(self) -> int:
        """The stages of the whole model, p v."""
        return self.p * self.v

    @property
    def splits_backward(self) -> bool:
        """Whether B computes only the input gradient and W the weight gradient."""
        return any(a.kind == "W" for a in self.actions)

    def stage(self, action: Action) -> int:
        """The stage an action runs: chunk c of rank r is stage ``c p + r``."""
        return action.chunk * self.p + action.rank

    def order(self, rank: int) -> list[Action]:
        """The actions of ``rank``, in the order it runs them."""
        return [a for a in self.actions if a.rank == rank]


def _build(name: str, p: int, m: int, v: int, orders: list[list[tuple]]) -> Schedule:
    """A :class:`Schedule` from each rank's list of (microbatch, chunk, kind)."""
    actions = tuple(
        Action(r, slot, mb, chunk, kind)
        for r, order in enumerate(orders)
        for slot, (mb, chunk, kind) in enumerate(order)
    )
    return Schedule(name, p, m, v, actions)


def gpipe(p: int, m: int) -> Schedule:
    """GPipe: every forward, then every backward (fill, then drain).

    Any m >= 1 works; each rank holds all m micro-batches' activations at the turn.

    Raises:
        ValueError: p or m not an int >= 1.
    """
    checks.positive_int("p", p)
    checks.positive_int("m", m)
    order = [(i, 0, "F") for i in range(m)] + [(i, 0, "B") for i in range(m)]
    return _build("GPipe", p, m, 1, [order] * p)


def one_f_one_b_order(p: int, m: int, r: int) -> list[tuple]:
    """Rank r's 1F1B order (Narayanan et al. 2021, Fig. 4 top).

    p - 1 - r warm-up forwards, then one forward and one backward at a time, then
    the remaining backwards.

    Returns:
        (microbatch, chunk, kind) triples, in the order rank r runs them.

    Raises:
        ValueError: p or m not an int >= 1, m < p, or r not in [0, p).
    """
    _check_m_at_least_p("1F1B", p, m)
    checks.int_in("r", r, 0, p - 1)
    # region 1f1b
    warmup = p - 1 - r  # forwards before the first backward can arrive
    order = [(i, 0, "F") for i in range(warmup)]
    for k in range(m - warmup):  # steady state: 1F1B
        order += [(warmup + k, 0, "F"), (k, 0, "B")]
    order += [(i, 0, "B") for i in range(m - warmup, m)]  # cool-down
    # endregion
    return order


def _check_m_at_least_p(schedule: str, p: int, m: int) -> None:
    checks.positive_int("p", p)
    checks.positive_int("m", m)
    if m < p:
        raise ValueError(
            f"m must be >= p for {schedule} (got m={m}, p={p}): with fewer "
            "micro-batches than stages there is no steady state (torch's "
            "Schedule1F1B rejects it too)"
        )


def one_f_one_b(p: int, m: int) -> Schedule:
    """1F1B: after a short warm-up each rank alternates one forward and one backward.

    Rank r holds at most p - r micro-batches' activations instead of m.

    Raises:
        ValueError: p or m not an int >= 1, or m < p.
    """
    _check_m_at_least_p("1F1B", p, m)
    return _build("1F1B", p, m, 1, [one_f_one_b_order(p, m, r) for r in range(p)])


def interleaved_1f1b(p: int, m: int, v: int) -> Schedule:
    """Megatron-LM's interleaved 1F1B: v chunks per rank, depth first.

    A rank runs forwards in rounds of p micro-batches per chunk: p micro-batches
    through chunk 0, the same p through chunk 1, ..., then the next p; backwards
    likewise from chunk v - 1 down. Rank r warms up with 2 (p - 1 - r) + (v - 1) p
    forwards (Megatron-LM's ``get_num_warmup_microbatches``), then alternates.

    Raises:
        ValueError: p, m not an int >= 1, v not an int >= 2 (v = 1 is 1F1B), or m
            not a multiple of p (Megatron-LM's constraint: the rounds are of p
            micro-batches; torch's ScheduleInterleaved1F1B relaxes it).
    """
    checks.positive_int("p", p)
    checks.positive_int("m", m)
    checks.integer("v", v, low=2)
    if m % p:
        raise ValueError(
            f"m must be a multiple of p for interleaved 1F1B (got m={m}, p={p}): "
            "each chunk takes the micro-batches in rounds of p"
        )

    def forward(k: int) -> tuple:  # k-th forward of a rank: (microbatch, chunk, F)
        return (k // (p * v) * p + k % p, k // p % v, "F")

    def backward(k: int) -> tuple:
        return (k // (p * v) * p + k % p, v - 1 - k // p % v, "B")

    orders = []
    for r in range(p):
        total = m * v
        warmup = min(2 * (p - 1 - r) + (v - 1) * p, total)
        order = [forward(k) for k in range(warmup)]
        for k in range(total - warmup):
            order += [forward(warmup + k), backward(k)]
        order += [backward(k) for k in range(total - warmup, total)]
        orders.append(order)
    return _build("interleaved 1F1B", p, m, v, orders)


def zb_h1(p: int, m: int) -> Schedule:
    """ZB-H1: 1F1B with each backward split into B (input gradient) and W (weights).

    B keeps 1F1B's place; rank r runs the W of micro-batch j right after the B of
    micro-batch j + r and its last r W after its last B. Delaying W lets B reach
    the earlier stages sooner, and the W fill the cool-down's idle time; every
    rank then holds p micro-batches at its peak, the first rank's 1F1B peak.

    Raises:
        ValueError: p or m not an int >= 1, or m < p.
    """
    _check_m_at_least_p("ZB-H1", p, m)
    orders = []
    for r in range(p):
        order: list[tuple] = []
        for mb, chunk, kind in one_f_one_b_order(p, m, r):
            order.append((mb, chunk, kind))
            if kind == "B" and mb >= r:
                order.append((mb - r, 0, "W"))
        order += [(j, 0, "W") for j in range(m - r, m)]
        orders.append(order)
    return _build("ZB-H1", p, m, 1, orders)


SCHEDULES: dict[str, Callable[..., Schedule]] = {
    "GPipe": gpipe,
    "1F1B": one_f_one_b,
    "interleaved 1F1B": interleaved_1f1b,
    "ZB-H1": zb_h1,
}


def make_schedule(name: str, p: int, m: int, v: int = 1) -> Schedule:
    """The schedule ``name`` for p ranks, m micro-batches, v chunks per rank.

    Raises:
        ValueError: an unknown name, v != 1 for a schedule without chunks, or the
            schedule's own constraint on p, m, v.
    """
    if name not in SCHEDULES:
        raise ValueError(f"name must be one of {sorted(SCHEDULES)}, got {name!r}")
    if name == "interleaved 1F1B":
        return interleaved_1f1b(p, m, v)
    if v != 1:
        raise ValueError(f"v must be 1 for {name} (one stage per rank), got {v!r}")
    return SCHEDULES[name](p, m)


def p2p_messages(schedule: Schedule) -> int:
    """Point-to-point messages in one step, all ranks: activations and gradients.

    Every F but the last stage's sends its output to the next stage, every B but
    the first stage's sends its input gradient to the previous one, when the two
    stages are on different ranks.
    """
    last = schedule.n_stages - 1
    count = 0
    for a in schedule.actions:
        s = schedule.stage(a)
        if a.kind == "F" and s < last and schedule.p > 1:
            count += 1
        elif a.kind == "B" and s > 0 and schedule.p > 1:
            count += 1
    return count
