"""Prefill/decode disaggregation: prompts on some GPUs, generation on others.

On a GPU that does both, a prompt's prefill step delays every running sequence's next
token (it raises TPOT), and decode steps delay prompts (TTFT). DistServe (Zhong et al.
2024) and Splitwise (Patel et al. 2024) give the two phases their own GPUs: *prefill
instances* run the prompts and emit each first token, then send the request's KV cache,
``prompt x (bytes per token)``, over a link to a *decode instance*, which generates the
rest. The price is the transfer, ``alpha + beta bytes`` on a link of the alpha-beta
model (:class:`~aiinfra.comm.cost.LinkModel`), and GPUs that can no longer lend each
other idle time. This cost model reuses the one-GPU simulator
(:mod:`~aiinfra.infer.batching.simulator`): a prefill instance is a GPU whose requests
generate one token; a decode instance receives each request with its prompt and first
token already cached (``cached = prompt``), so its first step is a decode. Requests go
to the instances of a kind in turn (round robin); a transfer starts when the first token
is out and does not slow either GPU. The colocated baseline spreads the same trace over
the same number of GPUs, each running continuous batching or chunked prefill.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from aiinfra import checks
from aiinfra.comm.cost import LinkModel
from aiinfra.infer.batching.simulator import simulate_continuous
from aiinfra.infer.step_cost import StepCost
from aiinfra.infer.trace import Record, Request


def _check_trace(requests: Sequence[Request]) -> None:
    if not requests or not all(isinstance(r, Request) for r in requests):
        raise TypeError("requests must be a non-empty sequence of Request")
    if len({r.id for r in requests}) != len(requests):
        raise ValueError("requests must have unique ids")


def kv_transfer_time(prompt: int, kv_bytes_per_token: int, link: LinkModel) -> float:
    """Seconds to send a prompt's KV cache: ``alpha + beta x prompt x bytes``.

    Args:
        prompt: tokens whose keys and values are sent, >= 1.
        kv_bytes_per_token: over all layers
            (:mod:`~aiinfra.models.attention.kv_cache_size`).
        link: the link's ``alpha`` (s) and ``beta`` (s per byte).

    Raises:
        ValueError: a size below 1.
        TypeError: ``link`` is not a :class:`~aiinfra.comm.cost.LinkModel`.
    """
    checks.positive_ints(prompt=prompt, kv_bytes_per_token=kv_bytes_per_token)
    if not isinstance(link, LinkModel):
        raise TypeError(f"link must be a LinkModel, got {type(link).__name__}")
    return link.alpha + link.beta * prompt * kv_bytes_per_token


def _round_robin(
    requests: Sequence[Request],
    n_gpus: int,
    cost: StepCost,
    max_batch: int,
    kv_capacity: int,
    token_budget: int | None,
) -> list[Record]:
    """Deal the requests in arrival order to ``n_gpus`` GPUs; simulate each."""
    order = sorted(requests, key=lambda r: r.arrival)
    records: dict[int, Record] = {}
    for g in range(n_gpus):
        mine = order[g::n_gpus]
        if not mine:
            continue
        local = [dataclasses.replace(r, id=j) for j, r in enumerate(mine)]
        result = simulate_continuous(local, cost, max_batch, kv_capacity, token_budget)
        for r, rec in zip(mine, result.records, strict=True):
            records[r.id] = dataclasses.replace(rec, request=r)
    return [records[r.id] for r in requests]


def simulate_colocated(
    requests: Sequence[Request],
    cost: StepCost,
    n_gpus: int,
    max_batch: int,
    kv_capacity: int,
    token_budget: int | None = None,
) -> list[Record]:
    """``n_gpus`` GPUs, each prefilling and decoding its share of the requests.

    Args:
        requests: the trace (any ids, unique).
        cost: seconds per step of one GPU.
        n_gpus: GPUs; request ``i`` in arrival order goes to GPU ``i mod n_gpus``.
        max_batch: most requests running on one GPU.
        kv_capacity: tokens of KV cache per GPU.
        token_budget: chunked prefill's tokens per step; ``None``: whole prompts.

    Returns:
        One record per request, in the order given.

    Raises:
        ValueError: a size below 1, ids not unique, or as
            :func:`~aiinfra.infer.batching.simulator.simulate_continuous`.
        TypeError: ``requests`` is not a non-empty sequence of :class:`Request`.
    """
    checks.positive_ints(n_gpus=n_gpus)
    _check_trace(requests)
    return _round_robin(requests, n_gpus, cost, max_batch, kv_capacity, token_budget)


def simulate_disaggregated(
    requests: Sequence[Request],
    cost: StepCost,
    n_prefill: int,
    n_decode: int,
    link: LinkModel,
    kv_bytes_per_token: int,
    max_batch: int,
    kv_capacity: int,
) -> list[Record]:
    """Prefill on ``n_prefill`` GPUs, KV transfer, decode on ``n_decode`` GPUs.

    Args:
        requests: the trace (any ids, unique).
        cost: seconds per step of one GPU (both kinds are the same GPU).
        n_prefill: prefill instances, one GPU each.
        n_decode: decode instances, one GPU each.
        link: between a prefill and a decode GPU.
        kv_bytes_per_token: bytes of KV cache per token sent.
        max_batch: most requests running on one GPU.
        kv_capacity: tokens of KV cache per GPU.

    Returns:
        One record per request, in the order given: the first token from the
        prefill GPU, the others from the decode GPU (the transfer is part of the
        time to the second token, so of TPOT, as DistServe counts it).

    Raises:
        ValueError: a size below 1, ids not unique, or as
            :func:`~aiinfra.infer.batching.simulator.simulate_continuous`.
        TypeError: ``requests`` is not a non-empty sequence of :class:`Request`,
            or ``link`` is not a :class:`~aiinfra.comm.cost.LinkModel`.
    """
    checks.positive_ints(n_prefill=n_prefill, n_decode=n_decode)
    _check_trace(requests)
    kv_transfer_time(1, kv_bytes_per_token, link)  # checks the link and the bytes
    # region disaggregate
    prompts = [dataclasses.replace(r, output=1) for r in requests]  # first token only
    prefilled = _round_robin(prompts, n_prefill, cost, max_batch, kv_capacity, None)
    handed = [  # the prompt and the first token travel; the decode GPU makes the rest
        Request(
            r.id,
            rec.first_token + kv_transfer_time(r.prompt, kv_bytes_per_token, link),
            r.prompt + 1,
            r.output - 1,
            cached=r.prompt,
        )
        for r, rec in zip(requests, prefilled, strict=True)
        if r.output > 1
    ]
    decoded = _round_robin(handed, n_decode, cost, max_batch, kv_capacity, None)
    # endregion
    later = {rec.request.id: rec.token_times for rec in decoded}  # tokens 2, 3, ...
    return [
        Record(
            rec.token_times + later.get(r.id, ()),
            r,
            rec.admitted,
            later[r.id][-1] if r.id in later else rec.first_token,
        )
        for r, rec in zip(requests, prefilled, strict=True)
    ]
