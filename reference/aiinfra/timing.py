"""How the benchmarks time a call: the best of repeats, on the right clock."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def cuda_wall_clock() -> float:
    """Wall time once the GPU has finished what was queued (CUDA is asynchronous)."""
    torch.cuda.synchronize()
    return time.perf_counter()


def best_seconds(
    fn: Callable[[], object],
    repeats: int,
    before: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.thread_time,
) -> float:
    """Fastest of ``repeats`` timed calls after a warm-up; ``before`` is untimed.

    On the CPU the clock is the thread's own CPU time: on a shared machine, wall
    time would also count the other programs that the thread waited for.
    """
    best = float("inf")
    for round_ in range(repeats + 1):
        if before is not None:
            before()
        start = clock()
        fn()
        if round_ > 0:  # round 0 warms up
            best = min(best, clock() - start)
    return best
