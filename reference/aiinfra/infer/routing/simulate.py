"""Three routers over replicas with prefix caches: what each one saves in prefill.

A data-parallel deployment runs ``R`` copies of the engine, each with its own KV
cache; a router in front picks the replica of every request. A replica holds a
prompt's cached prefix only if an earlier request that shares it went there, so the
router decides the hit rate. Each replica here is the paged allocator
(:class:`~aiinfra.infer.paged.block_allocator.BlockAllocator`): full blocks named by
a hash of their prefix, freed blocks kept until the pool needs them (least recently
freed first). Requests arrive one per tick and occupy their replica for ``hold``
ticks (the load); when one finishes its answer is appended and its blocks freed,
still cached. Three routers: *round-robin*, *least-loaded* (fewest running
requests) and *prefix-aware*: the replica with the longest cached prefix among those
whose load is within ``load_bound`` of the least loaded (SGLang's router and
Dynamo's KV router make the same trade, by other rules). A hit is counted as the
engine does: the block that holds a prompt's last token is recomputed for its
logits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiinfra import checks
from aiinfra.infer.paged.block_allocator import BlockAllocator, OutOfBlocksError
from aiinfra.infer.routing.workload import RoutedRequest

# A router: (arrival index, running requests per replica, cached tokens per replica)
# -> the replica it sends the request to.
Router = Callable[[int, Sequence[int], Sequence[int]], int]
ROUTERS = ("round-robin", "least-loaded", "prefix-aware")


def round_robin(i: int, loads: Sequence[int], hits: Sequence[int]) -> int:
    """Request ``i`` goes to replica ``i mod R``: blind to load and cache."""
    return i % len(loads)


def least_loaded(i: int, loads: Sequence[int], hits: Sequence[int]) -> int:
    """The replica with the fewest running requests (the lowest index on a tie)."""
    return min(range(len(loads)), key=lambda r: (loads[r], r))


def prefix_aware(load_bound: int) -> Router:
    """The longest cached prefix among replicas at most ``load_bound`` above the least.

    Ties go to the less loaded, then the lower index. ``load_bound = 0`` is
    least-loaded with the cache as a tie-breaker; a large bound ignores load.

    Raises:
        ValueError: ``load_bound < 0``.
    """
    checks.non_negative_int("load_bound", load_bound)

    # region prefix-aware
    def route(i: int, loads: Sequence[int], hits: Sequence[int]) -> int:
        allowed = [r for r in range(len(loads)) if loads[r] <= min(loads) + load_bound]
        return min(allowed, key=lambda r: (-hits[r], loads[r], r))

    # endregion
    return route


@dataclass
class RoutingResult:
    """What a replay gives, per request and summed.

    Args:
        routes: the replica of each request.
        cached: prompt tokens each request found in its replica's cache.
        computed: prompt tokens each request's prefill computed.
        per_replica: requests routed to each replica.
    """

    routes: list[int] = field(default_factory=list)
    cached: list[int] = field(default_factory=list)
    computed: list[int] = field(default_factory=list)
    per_replica: list[int] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens served from a cache."""
        return sum(self.cached) / (sum(self.cached) + sum(self.computed))

    @property
    def imbalance(self) -> float:
        """Requests on the busiest replica over the mean (1: even)."""
        return max(self.per_replica) * len(self.per_replica) / sum(self.per_replica)


def _reusable(cache: BlockAllocator, tokens: Sequence[int]) -> int:
    """Cached prompt tokens a request would reuse: full blocks, last token excluded."""
    b = cache.block_size
    return min(len(cache.cached_prefix(tokens)), (len(tokens) - 1) // b) * b


def simulate(
    requests: Sequence[RoutedRequest],
    n_replicas: int,
    router: Router,
    block_size: int = 16,
    num_blocks: int = 512,
) -> RoutingResult:
    """Replay ``requests``, one arrival per tick, through ``router`` over replicas.

    Args:
        requests: in arrival order.
        n_replicas: engine replicas ``R``.
        router: picks the replica of each request (:data:`Router`).
        block_size: tokens per cache block.
        num_blocks: blocks in each replica's pool (cache capacity).

    Returns:
        The routes, cached and computed tokens per request, requests per replica.

    Raises:
        ValueError: ``n_replicas``, ``block_size`` or ``num_blocks`` below 1, an
            empty request list, a route outside ``[0, R)``, or a pool too small for
            the requests running on it (``num_blocks``).
    """
    checks.positive_ints(
        n_replicas=n_replicas, block_size=block_size, num_blocks=num_blocks
    )
    if not requests:
        raise ValueError("requests must hold at least one request")
    caches = [BlockAllocator(num_blocks, block_size) for _ in range(n_replicas)]
    running: list[tuple[int, int, int]] = []  # (finish tick, replica, request)
    res = RoutingResult(per_replica=[0] * n_replicas)
    for i, req in enumerate(requests):
        # region replay
        for done in [x for x in running if x[0] <= i]:  # finished: cache the answer
            running.remove(done)
            _, r, j = done
            _grow(caches[r], j, requests[j].output)
            caches[r].free(j)
        loads = [sum(1 for _, r, _ in running if r == q) for q in range(n_replicas)]
        hits = [_reusable(c, req.tokens) for c in caches]
        r = router(i, loads, hits)
        if not (isinstance(r, int) and 0 <= r < n_replicas):
            raise ValueError(
                f"router must return a replica in [0, {n_replicas}), got {r!r}"
            )
        max_blocks = (len(req.tokens) - 1) // block_size
        try:
            caches[r].allocate(i, req.tokens, max_cached_blocks=max_blocks)
        except OutOfBlocksError as e:
            raise ValueError(f"num_blocks={num_blocks} is too small: {e}") from e
        cached = caches[r].num_cached_tokens[i]
        # endregion
        res.routes.append(r)
        res.cached.append(cached)
        res.computed.append(len(req.tokens) - cached)
        res.per_replica[r] += 1
        running.append((i + req.hold, r, i))
    return res


def _grow(cache: BlockAllocator, seq_id: int, output: Sequence[int]) -> None:
    """Append a finished request's answer to its blocks (so the next turn hits)."""
    for t in output:
        try:
            cache.append(seq_id, t)
        except OutOfBlocksError as e:
            raise ValueError(f"num_blocks={cache.num_blocks} is too small: {e}") from e


def make_router(name: str, load_bound: int = 2) -> Router:
    """The router called ``name`` (one of :data:`ROUTERS`).

    Raises:
        ValueError: an unknown ``name`` or ``load_bound < 0``.
    """
    if name not in ROUTERS:
        raise ValueError(f"name must be one of {ROUTERS}, got {name!r}")
    if name == "round-robin":
        return round_robin
    if name == "least-loaded":
        return least_loaded
    return prefix_aware(load_bound)
