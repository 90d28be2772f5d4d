"""Iteration-level simulation of a serving GPU: static, continuous and chunked batching.

A GPU serving a model runs *steps*, one forward pass over the new tokens of the
batch, each timed by a cost model (:mod:`~aiinfra.infer.step_cost`). Three schedulers
decide what each step holds. *Static* batching takes up to ``max_batch`` waiting
requests, pads them to the longest prompt and output, and admits nothing new until
the longest is done. *Continuous* batching
(Orca's iteration-level scheduling, Yu et al. 2022) admits and retires requests
between any two steps; a step holds the whole prompts of new requests next to one
token of each running one. *Chunked prefill* (Sarathi-Serve, Agrawal et al. 2024)
caps the tokens of a step at ``token_budget``: the decodes go first and prompts fill
the rest in chunks, so a long prompt no longer stalls the decodes. Every request
reserves ``prompt + output`` tokens of KV cache when admitted (Orca reserves the
maximum length; vLLM allocates blocks as it goes and preempts instead). The
simulation jumps over runs of decode-only steps with one vectorised cost call, so a
trace of hundreds of requests takes milliseconds. Each request comes back as a
:class:`~aiinfra.infer.trace.Record`, the time of each of its tokens included.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aiinfra import checks
from aiinfra.infer.step_cost import Chunk, StepCost
from aiinfra.infer.trace import Record, Request


@dataclass
class SimResult:
    """Records in trace order and the number of steps the GPU ran."""

    records: list[Record]
    steps: int


def _check(requests: Sequence[Request], max_batch: int, kv_capacity: int) -> None:
    for name, value in (("max_batch", max_batch), ("kv_capacity", kv_capacity)):
        checks.positive_int(name, value)
    if not requests or not all(isinstance(r, Request) for r in requests):
        raise TypeError("requests must be a non-empty sequence of Request")
    worst = max(requests, key=lambda r: r.prompt + r.output)
    if worst.prompt + worst.output > kv_capacity:
        raise ValueError(
            f"kv_capacity={kv_capacity} tokens is below request {worst.id}'s "
            f"prompt + output = {worst.prompt + worst.output}"
        )


def simulate_static(
    requests: Sequence[Request], cost: StepCost, max_batch: int, kv_capacity: int
) -> SimResult:
    """Static batching: a batch is padded and runs until its longest output is done.

    When the GPU is idle it takes the waiting requests in arrival order, up to
    ``max_batch`` and while ``n (P + O) <= kv_capacity`` (``P``, ``O``: the
    batch's longest prompt and output). One prefill step of ``n x P`` tokens gives
    every first token; then ``O - 1`` decode steps of ``n`` tokens follow, finished
    sequences included (padding). A request's tokens stream out as made, but its
    slot is freed with the batch.

    Raises:
        ValueError: a size below 1, a request that could never fit, or a request
            with ``cached > 0``.
        TypeError: ``requests`` is not a sequence of :class:`Request`.
    """
    _check(requests, max_batch, kv_capacity)
    if any(r.cached for r in requests):
        raise ValueError("static batching pads prompts: requests must have cached == 0")
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival)
    records: dict[int, Record] = {}  # by id
    t, nxt, steps = 0.0, 0, 0
    while nxt < len(order):
        t = max(t, requests[order[nxt]].arrival)
        batch: list[Request] = []
        while nxt < len(order) and len(batch) < max_batch:
            r = requests[order[nxt]]
            p = max([r.prompt] + [b.prompt for b in batch])
            o = max([r.output] + [b.output for b in batch])
            if r.arrival > t or (len(batch) + 1) * (p + o) > kv_capacity:
                break
            batch.append(r)
            nxt += 1
        n, p, o = len(batch), max(b.prompt for b in batch), max(b.output for b in batch)
        start = t
        t += float(cost([(p, 0)] * n, 0, 0))  # prefill: every prompt padded to p
        ends = t + np.cumsum(cost([], n, n * (p + np.arange(o - 1))))  # (o - 1,)
        first, t = t, float(ends[-1]) if o > 1 else t
        for b in batch:  # its tokens stream out; its slot is freed at t
            times = [first] + ends[: b.output - 1].tolist()
            records[b.id] = Record(times, b, start, t)
        steps += o
    return SimResult([records[r.id] for r in requests], steps)


def simulate_continuous(
    requests: Sequence[Request],
    cost: StepCost,
    max_batch: int,
    kv_capacity: int,
    token_budget: int | None = None,
) -> SimResult:
    """Continuous (iteration-level) batching, with chunked prefill if a budget is set.

    Before every step, waiting requests are admitted in arrival order while fewer
    than ``max_batch`` run and their ``prompt + output`` tokens fit what the
    running ones reserve. Without a budget a step holds the whole remaining prompt
    of every new request and one token per decoding one; with ``token_budget``
    the decodes come first and the prompts fill the remaining tokens in chunks, in
    arrival order. A request's first token comes with the step that ends its
    prompt; it is released with its last token.

    Args:
        requests: the trace; ``requests[i].id`` must be ``i``.
        cost: seconds per step.
        max_batch: most requests running at once.
        kv_capacity: tokens of KV cache.
        token_budget: most new tokens per step (chunked prefill), >= ``max_batch``;
            ``None``: no limit.

    Raises:
        ValueError: a size below 1, a budget below ``max_batch``, ids that are not
            the positions, or a request that could never fit.
        TypeError: ``requests`` is not a sequence of :class:`Request`.
    """
    _check(requests, max_batch, kv_capacity)
    if token_budget is not None and (
        isinstance(token_budget, bool)
        or not isinstance(token_budget, int)
        or token_budget < max_batch
    ):
        raise ValueError(
            f"token_budget must be an int >= max_batch, got {token_budget!r}"
        )
    if any(r.id != i for i, r in enumerate(requests)):
        raise ValueError("requests[i].id must be i")
    order = deque(sorted(range(len(requests)), key=lambda i: requests[i].arrival))
    records: dict[int, Record] = {}  # by id
    admitted = [0.0] * len(requests)
    times: list[list] = [[] for _ in requests]  # chunks of token times
    decoding: set[int] = set()  # ids of the requests past their prompt
    waiting: deque[Request] = deque()
    prefilling: list[list] = []  # [request, prompt tokens in the cache]
    finishes: list[tuple[int, int]] = []  # heap of (step that ends it, id)
    t, steps, reserved, n_dec, ctx = 0.0, 0, 0, 0, 0  # ctx: decoders' cached tokens

    def retire(i: int) -> None:  # request i's last token came with this step
        nonlocal reserved, n_dec, ctx
        r = requests[i]
        records[i] = Record(np.concatenate(times[i]).tolist(), r, admitted[i], t)
        reserved -= r.prompt + r.output
        if r.output > 1:
            n_dec, ctx = n_dec - 1, ctx - (r.prompt + r.output - 1)
            decoding.remove(i)

    def retire_due() -> None:
        while finishes and finishes[0][0] == steps:
            retire(heapq.heappop(finishes)[1])

    while order or waiting or prefilling or n_dec:
        while order and requests[order[0]].arrival <= t:
            waiting.append(requests[order.popleft()])
        if not (waiting or prefilling or n_dec):
            t = requests[order[0]].arrival
            continue
        # region schedule: admit in arrival order, then fill the step's token budget
        while waiting and len(prefilling) + n_dec < max_batch:
            r = waiting[0]
            if reserved + r.prompt + r.output > kv_capacity:
                break  # first come, first served: no overtaking
            reserved += waiting.popleft().prompt + r.output
            admitted[r.id] = t
            prefilling.append([r, r.cached])
        budget = (token_budget or np.inf) - n_dec  # the decodes go first
        chunks: list[Chunk] = []
        for r, done in prefilling:
            c = int(min(r.prompt - done, budget))
            if c <= 0:
                break
            chunks.append((c, done))
            budget -= c
        # endregion
        if chunks:  # a step with prompts: whole, or chunks within the budget
            t, steps, ctx = t + float(cost(chunks, n_dec, ctx)), steps + 1, ctx + n_dec
            for i in decoding:  # one token each
                times[i].append((t,))
            retire_due()
            for entry, (c, _) in zip(prefilling, chunks, strict=False):
                entry[1] += c
                r = entry[0]
                if entry[1] < r.prompt:
                    continue
                times[r.id].append((t,))  # its first token
                if r.output == 1:
                    retire(r.id)
                else:
                    n_dec, ctx = n_dec + 1, ctx + r.prompt
                    decoding.add(r.id)
                    heapq.heappush(finishes, (steps + r.output - 1, r.id))
            prefilling = [e for e in prefilling if e[1] < e[0].prompt]
            continue
        # region decode-run: only decodes until the next finish or admissible arrival
        k = finishes[0][0] - steps
        ends = t + np.cumsum(cost([], n_dec, ctx + n_dec * np.arange(k)))  # (k,)
        if order and not waiting and n_dec < max_batch:
            k = min(k, int(np.searchsorted(ends, requests[order[0]].arrival)) + 1)
        t, steps, ctx = float(ends[k - 1]), steps + k, ctx + n_dec * k
        for i in decoding:  # a token each step
            times[i].append(ends[:k])
        # endregion
        retire_due()
    return SimResult([records[r.id] for r in requests], steps)
