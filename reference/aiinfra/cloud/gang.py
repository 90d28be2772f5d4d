"""Why a training job is scheduled as a gang: a small pod scheduler, two ways.

A job of N pods runs only when all N hold a node. A scheduler that places pods one
at a time, as they arrive, can give each of two jobs part of what it needs: both
then wait for nodes the other holds, forever (a deadlock, until a timeout kills
them). A gang scheduler (Kueue's admission, Volcano's PodGroup ``minMember``)
admits a job only when all its pods fit at once. :func:`schedule` runs both
policies on the same arrivals, in time steps.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    """A job: its name, its pods (one node each) and its run time in steps."""

    name: str
    pods: int
    steps: int


def schedule(
    nodes: int, jobs: list[Job], gang: bool, horizon: int
) -> list[dict[str, int]]:
    """Simulate ``horizon`` steps; return, per step, the nodes each job holds.

    Pods arrive interleaved (one pod of each waiting job in turn, the order in
    which the controllers create them). Without ``gang`` each pod takes a free
    node as it arrives; a job runs (its steps count down) only while it holds all
    its pods. With ``gang`` a job is admitted, in arrival order, only when all its
    pods fit on the free nodes. A finished job releases its nodes.

    Args:
        nodes: nodes of the cluster, >= 1.
        jobs: the jobs, in arrival order; each needs ``1 <= pods <= nodes``.
        gang: admit whole jobs only.
        horizon: steps to simulate, >= 1.

    Returns:
        One dict per step: job name -> nodes it holds during that step.

    Raises:
        ValueError: a bad count, a job larger than the cluster, duplicate names.
    """
    if nodes < 1 or horizon < 1:
        raise ValueError(f"nodes and horizon must be >= 1, got {nodes}, {horizon}")
    if len({j.name for j in jobs}) != len(jobs):
        raise ValueError("jobs must have distinct names")
    for j in jobs:
        if not 1 <= j.pods <= nodes or j.steps < 1:
            raise ValueError(
                f"job {j.name!r}: pods must be in 1..nodes ({nodes}) and steps >= 1, "
                f"got pods={j.pods}, steps={j.steps}"
            )
    held = {j.name: 0 for j in jobs}
    left = {j.name: j.steps for j in jobs}
    out = []
    for _ in range(horizon):
        free = nodes - sum(held.values())
        waiting = [j for j in jobs if left[j.name] > 0 and held[j.name] < j.pods]
        if gang:
            for j in waiting:
                if held[j.name] == 0 and j.pods <= free:
                    held[j.name], free = j.pods, free - j.pods
        else:  # one pod of each waiting job in turn, while nodes are free
            while free and waiting:
                for j in list(waiting):
                    if free and held[j.name] < j.pods:
                        held[j.name], free = held[j.name] + 1, free - 1
                waiting = [j for j in waiting if held[j.name] < j.pods]
        out.append(dict(held))
        for j in jobs:
            if left[j.name] > 0 and held[j.name] == j.pods:
                left[j.name] -= 1
                if left[j.name] == 0:
                    held[j.name] = 0
    return out


def finished_at(steps: list[dict[str, int]], jobs: list[Job]) -> dict[str, int | None]:
    """The step after which each job had run all its steps (``None``: never)."""
    done: dict[str, int | None] = {}
    for j in jobs:
        ran, done[j.name] = 0, None
        for t, held in enumerate(steps):
            ran += held[j.name] == j.pods
            if ran == j.steps:
                done[j.name] = t + 1
                break
    return done
