"""One spawn of ranks shared by every test that asks for its results.

Spawning gloo ranks costs seconds, so the checks of a test file (or of several) run
together in one spawned function that returns what each check found, and each test
asserts on its part. A spawn that fails is not repeated: every later test re-raises
its error at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from aiinfra.distributed import run_distributed


@functools.cache
def _spawn_once(
    fn: Callable[[], Any], world_size: int, timeout: float
) -> tuple[list[Any] | None, Exception | None]:
    try:
        return run_distributed(fn, world_size, timeout=timeout), None
    except (RuntimeError, TimeoutError) as e:  # a failed spawn is not repeated
        return None, e


def shared_results(fn: Callable[[], Any], world_size: int, timeout: float) -> list:
    """``fn`` on ``world_size`` spawned gloo ranks, once per test session.

    Returns:
        What ``fn`` returned, per rank.

    Raises:
        RuntimeError, TimeoutError: the spawn failed (once; later calls re-raise).
    """
    results, error = _spawn_once(fn, world_size, timeout)
    if error is not None:
        raise error
    return results
