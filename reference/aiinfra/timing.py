"""How the benchmarks time a call: the best of repeats, on the right clock.

Every timing also notes how far its repeats spread (:func:`note_spread`): the
``aiinfra`` command collects the spreads of a run (:func:`recording`) into the
result's stamp and warns when they are too wide for the run's comparisons to mean
anything (a shared, loaded machine). Outside :func:`recording` nothing is kept.
"""

from __future__ import annotations

import contextlib
import contextvars
import statistics
import time
from collections.abc import Callable, Iterator, Sequence

# The spreads of the timings taken inside recording(), or None outside it.
_SPREADS: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "aiinfra_timing_spreads", default=None
)


@contextlib.contextmanager
def recording() -> Iterator[list[float]]:
    """Collect the spread of every timing taken inside this block."""
    spreads: list[float] = []
    token = _SPREADS.set(spreads)
    try:
        yield spreads
    finally:
        _SPREADS.reset(token)


def recorded() -> list[float]:
    """The spreads noted so far inside :func:`recording` (empty outside it)."""
    return list(_SPREADS.get() or ())


def spread(seconds: Sequence[float]) -> float:
    """How far the repeats of one timing spread: ``(median - best) / best``."""
    best = min(seconds)
    return (statistics.median(seconds) - best) / best if best > 0 else 0.0


def note_spread(seconds: Sequence[float]) -> None:
    """Note the spread of one timing's repeats (kept only inside :func:`recording`)."""
    spreads = _SPREADS.get()
    if spreads is not None and len(seconds) > 1:
        spreads.append(spread(seconds))


def cuda_wall_clock() -> float:
    """Wall time once the GPU has finished what was queued (CUDA is asynchronous)."""
    import torch

    torch.cuda.synchronize()
    return time.perf_counter()


def best_seconds(
    fn: Callable[[], object],
    repeats: int,
    before: Callable[[], object] | None = None,
    clock: Callable[[], float] | None = None,
) -> float:
    """Fastest of ``repeats`` timed calls after a warm-up; ``before`` is untimed.

    On the CPU the clock (by default) is the thread's own CPU time: on a shared
    machine, wall time would also count the other programs that the thread waited
    for. It is looked up at the call: a Python without it (Pyodide, where the
    book's calculators import this package) still imports the module.
    """
    clock = clock or time.thread_time
    times = []
    for round_ in range(repeats + 1):
        if before is not None:
            before()
        start = clock()
        fn()
        if round_ > 0:  # round 0 warms up
            times.append(clock() - start)
    note_spread(times)
    return min(times)
