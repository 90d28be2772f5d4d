"""Replay a pipeline schedule on a cost model: the timeline, its bubble, its memory.

Each rank runs its actions one at a time, in the schedule's order, each as soon as
its input is there: the forward of micro-batch i on stage s needs the forward of i
on stage s - 1, the backward needs the backward on stage s + 1 (on the last stage,
the forward on it), W needs B on the same stage, and an output that crosses to
another rank arrives ``latency`` after it is computed. Costs are per micro-batch
through all of a rank's layers, so a chunk of 1/v of them takes 1/v of the time; a
schedule that does not split the backward runs B and W as one B of
``t_b + t_w``. Nothing here uses the published bubble formulas: the tests compare
what this replay finds with them (Huang et al. 2019; Narayanan et al. 2021; Qi et
al. 2024). Notation: p ranks, m micro-batches (the book's k; the papers write
m), v chunks per rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra.parallel.pipeline.schedules import Action, Schedule


@dataclass(frozen=True)
class PipelineCosts:
    """Seconds (or any unit) per micro-batch through one rank's layers.

    Attributes:
        t_f: forward.
        t_b: backward to the input gradient (B).
        t_w: backward to the weight gradients (W).
        latency: from the end of a pass to its output's arrival on the next rank.
    """

    t_f: float = 1.0
    t_b: float = 1.0
    t_w: float = 1.0
    latency: float = 0.0

    def __post_init__(self) -> None:
        for name in ("t_f", "t_b", "t_w", "latency"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if not self.t_f + self.t_b + self.t_w > 0:
            raise ValueError("t_f + t_b + t_w must be > 0")


@dataclass(frozen=True)
class TimedAction:
    """An action and when it ran."""

    action: Action
    start: float
    end: float


@dataclass(frozen=True)
class PipelineTimeline:
    """One simulated step of a schedule.

    Attributes:
        schedule: what was replayed.
        spans: every action with its start and end, in the schedule's order.
        peak_in_flight: per rank, the most (micro-batch, chunk) pairs whose
            forward has run and whose backward (its W, when split) has not.
    """

    schedule: Schedule
    spans: tuple[TimedAction, ...]
    peak_in_flight: tuple[int, ...]

    @property
    def step(self) -> float:
        """From the first forward's start to the last action's end."""
        return max(s.end for s in self.spans)

    @property
    def busy(self) -> float:
        """Compute time summed over ranks."""
        return sum(s.end - s.start for s in self.spans)

    @property
    def bubble(self) -> float:
        """Idle share of the step, all ranks together: ``1 - busy / (p step)``."""
        return 1 - self.busy / (self.schedule.p * self.step)

    @property
    def bubble_over_ideal(self) -> float:
        """Idle time over compute time, ``p step / busy - 1``.

        The step's excess over a pipeline without bubbles.
        """
        return self.schedule.p * self.step / self.busy - 1

    def peak_activations(self) -> tuple[float, ...]:
        """:attr:`peak_in_flight` in micro-batches through all of a rank's layers.

        A chunk holds 1/v of them.
        """
        return tuple(n / self.schedule.v for n in self.peak_in_flight)


def _durations(schedule: Schedule, costs: PipelineCosts) -> dict[str, float]:
    """Time of an F, B and W of one chunk (1/v of a rank's layers)."""
    t_b = costs.t_b if schedule.splits_backward else costs.t_b + costs.t_w
    return {
        k: t / schedule.v for k, t in (("F", costs.t_f), ("B", t_b), ("W", costs.t_w))
    }


def _dependency(schedule: Schedule, a: Action) -> tuple[str, int, int] | None:
    """(kind, microbatch, stage) that must finish before ``a`` starts, or None."""
    s, last = schedule.stage(a), schedule.n_stages - 1
    if a.kind == "F":
        return ("F", a.microbatch, s - 1) if s > 0 else None
    if a.kind == "B":
        return ("B", a.microbatch, s + 1) if s < last else ("F", a.microbatch, s)
    return ("B", a.microbatch, s)


def _rank_of(schedule: Schedule, stage: int) -> int:
    return stage % schedule.p


def simulate(
    schedule: Schedule, costs: PipelineCosts | None = None
) -> PipelineTimeline:
    """Replay ``schedule`` under ``costs``.

    Args:
        schedule: from :mod:`~aiinfra.parallel.pipeline.schedules`.
        costs: pass times and latency (default: t_f = t_b = t_w = 1, no latency).

    Returns:
        The timeline, with the peak in-flight micro-batches of every rank.

    Raises:
        ValueError: the schedule deadlocks (a rank waits for an action that waits
            for it), or names an action twice or misses one.
    """
    costs = costs or PipelineCosts()
    p = schedule.p
    orders = [schedule.order(r) for r in range(p)]
    expected = schedule.m * schedule.n_stages * (3 if schedule.splits_backward else 2)
    keys = {(a.kind, a.microbatch, schedule.stage(a)) for a in schedule.actions}
    if len(keys) != len(schedule.actions) or len(keys) != expected:
        raise ValueError(f"schedule {schedule.name!r} repeats or misses an action")
    duration = _durations(schedule, costs)
    done: dict[tuple[str, int, int], float] = {}  # (kind, mb, stage) -> end time
    spans: dict[Action, TimedAction] = {}
    nxt, free = [0] * p, [0.0] * p  # next slot, time the rank is free
    while len(spans) < len(schedule.actions):
        progress = False
        for r in range(p):
            while nxt[r] < len(orders[r]):
                a = orders[r][nxt[r]]
                dep = _dependency(schedule, a)
                if dep is not None and dep not in done:
                    break  # wait for another rank (or a later slot of this one)
                ready = 0.0
                if dep is not None:
                    ready = done[dep]
                    if _rank_of(schedule, dep[2]) != r:
                        ready += costs.latency
                start = max(free[r], ready)
                end = start + duration[a.kind]
                spans[a] = TimedAction(a, start, end)
                done[(a.kind, a.microbatch, schedule.stage(a))] = end
                free[r], nxt[r], progress = end, nxt[r] + 1, True
        if not progress:
            raise ValueError(f"schedule {schedule.name!r} deadlocks")
    last_kind = "W" if schedule.splits_backward else "B"
    peaks = []
    for order in orders:  # a rank runs its actions in order: count along it
        live = peak = 0
        for a in order:
            live += (a.kind == "F") - (a.kind == last_kind)
            peak = max(peak, live)
        peaks.append(peak)
    return PipelineTimeline(
        schedule, tuple(spans[a] for a in schedule.actions), tuple(peaks)
    )
