"""The engine's iterations one at a time: what each step admitted, ran and released.

A step-by-step picture of continuous batching needs, for every iteration of
:meth:`~aiinfra.infer.engine.core.Engine.step`, which requests arrived, how many
tokens each one ran and why (a prompt chunk, a decode, or the recomputation of a
preempted request), which ones finished or were preempted, and how many KV blocks
were left. :func:`trace_iterations` runs a real engine and reads that off its
scheduler's state before and after each step: nothing is modelled, so a figure drawn
from the trace shows what the engine did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiinfra import checks
from aiinfra.infer.engine.core import Engine, SamplingParams

KINDS = ("prefill", "decode", "recompute")  # why a request ran tokens in a step


@dataclass(frozen=True)
class Iteration:
    """One engine step, read off the scheduler (request ids as the engine gives them).

    ``ran`` holds ``(request id, kind, tokens)`` in the order of the step's batch
    (running requests first, then those admitted); ``kind`` is one of
    :data:`KINDS`. ``blocks`` gives the KV blocks each unfinished request holds
    after the step.
    """

    step: int
    arrived: tuple[str, ...]
    ran: tuple[tuple[str, str, int], ...]
    first_token: tuple[str, ...]
    finished: tuple[str, ...]
    preempted: tuple[str, ...]
    waiting: tuple[str, ...]
    blocks: tuple[tuple[str, int], ...]
    free_blocks: int


def trace_iterations(
    engine: Engine,
    arrivals: Mapping[int, Sequence[tuple[Sequence[int], SamplingParams]]],
    max_steps: int = 100,
) -> list[Iteration]:
    """Run ``engine`` to the end, adding ``arrivals[k]`` before step ``k``.

    Args:
        engine: an engine with nothing queued.
        arrivals: step index -> the ``(prompt, params)`` of the requests that arrive
            just before it.
        max_steps: most steps to run.

    Returns:
        One :class:`Iteration` per step run.

    Raises:
        ValueError: ``engine`` already holds requests, ``max_steps < 1``, or a step
            index is negative.
    """
    checks.positive_int("max_steps", max_steps)
    if engine.has_unfinished():
        raise ValueError("engine must hold no request before the trace")
    if any(not checks.is_int(k) or k < 0 for k in arrivals):
        raise ValueError("arrivals must be keyed by step indices >= 0")
    s, trace = engine.scheduler, []
    last = max(arrivals, default=0)
    for step in range(max_steps):
        new = [engine.add_request(p, params) for p, params in arrivals.get(step, ())]
        if not engine.has_unfinished():
            if step >= last:
                break
            continue
        # region snapshot: each request's state before the step
        queue = s.running + list(s.waiting)  # the order a batch is built in
        before = [(q.num_computed, len(q.output), q.num_preemptions) for q in queue]
        engine.step()
        ran, first, finished, preempted = [], [], [], []
        for q, (computed, outputs, preemptions) in zip(queue, before, strict=True):
            if q.num_preemptions > preemptions:
                preempted.append(q.request_id)
                continue
            n = q.num_computed - computed
            if n == 0:
                continue
            kind = "prefill" if outputs == 0 else "decode" if n == 1 else "recompute"
            if kind == "decode" and computed < len(q.prompt) + outputs - 1:
                kind = "recompute"  # the last token of a recomputation
            ran.append((q.request_id, kind, n))
            if outputs == 0 and q.output:
                first.append(q.request_id)
            if q.finish_reason is not None:
                finished.append(q.request_id)
        # endregion
        tables = s.allocator.block_tables
        trace.append(
            Iteration(
                step,
                tuple(q.request_id for q in new),
                tuple(ran),
                tuple(first),
                tuple(finished),
                tuple(preempted),
                tuple(q.request_id for q in s.waiting),
                tuple((q.request_id, len(tables[q.seq_id])) for q in s.running),
                s.allocator.num_free_blocks,
            )
        )
    return trace
