"""The answers of ``docs/cloud/questions.rst``, computed."""

from __future__ import annotations

from aiinfra.cloud import gang

from .kubernetes import GANG_HORIZON, GANG_JOBS, GANG_NODES
from .restarts import restart_value

__all__ = ["gang_finish_step", "jobs_finished", "resume_step", "retrained_steps"]


def jobs_finished(is_gang: bool) -> int:
    """How many of the figure's two jobs finish within the simulated steps."""
    steps = gang.schedule(GANG_NODES, list(GANG_JOBS), is_gang, GANG_HORIZON)
    done = gang.finished_at(steps, list(GANG_JOBS))
    return sum(step is not None for step in done.values())


def gang_finish_step(job: str) -> int:
    """The step after which job ``job`` is done under gang scheduling."""
    steps = gang.schedule(GANG_NODES, list(GANG_JOBS), True, GANG_HORIZON)
    return gang.finished_at(steps, list(GANG_JOBS))[job]


def resume_step(fail_at: int) -> int:
    """The step resumed from after a death before ``fail_at`` (the run's interval)."""
    every = restart_value("every")
    return (fail_at - 1) // every * every


def retrained_steps(fail_at: int) -> int:
    """Steps trained twice when a worker dies before step ``fail_at``."""
    return fail_at - 1 - resume_step(fail_at)
